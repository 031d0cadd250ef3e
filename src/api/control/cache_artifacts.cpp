#include "api/control/cache_artifacts.h"

#include <algorithm>

#include "api/auth/tenants.h"

namespace prefixd::api {

namespace {
constexpr std::string_view kExtension = ".prefixd";
constexpr std::size_t kMaxNameLength = 128;
}  // namespace

std::filesystem::path tenant_artifact_dir(const std::filesystem::path& base, std::string_view tenant) {
  if (base.empty() || tenant == kDefaultTenant) return base;
  std::filesystem::path dir = base / "tenants" / std::string(tenant);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // a failure surfaces as the save's I/O error
  return dir;
}

std::expected<std::filesystem::path, ApiError> artifact_path(const std::filesystem::path& dir, const nlohmann::ordered_json& body) {
  if (dir.empty()) {
    return std::unexpected(invalid_request(
        "artifacts are off: start the server with --cache-disk-path or --cache-artifact-path", "artifacts_disabled"));
  }
  const auto name = body.find("name");
  if (name == body.end() || !name->is_string()) return std::unexpected(invalid_param("name", "'name' must be a string"));
  const std::string value = name->get<std::string>();
  if (!safe_file_name(value)) {
    return std::unexpected(invalid_param(
        "name", "'name' must be 1 to 128 characters of letters, digits, '.', '_' and '-', not starting with '.'"));
  }
  return dir / (value + std::string(kExtension));
}

bool safe_file_name(std::string_view name) {
  const bool allowed = std::ranges::all_of(name, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
  return !name.empty() && name.size() <= kMaxNameLength && allowed && name.front() != '.';
}

ApiError artifact_error(const cache::ArtifactError& error) {
  using Kind = cache::ArtifactError::Kind;
  ApiError out{.message = error.what()};
  switch (error.kind()) {
    case Kind::not_found: out.status = 404; out.code = "artifact_not_found"; break;
    case Kind::nothing_cached: out.status = 404; out.code = "nothing_cached"; break;
    case Kind::model: out.status = 409; out.code = "artifact_model_mismatch"; break;
    case Kind::version: out.status = 409; out.code = "artifact_version_mismatch"; break;
    case Kind::corrupt: out.status = 422; out.code = "artifact_corrupt"; break;
    case Kind::io: out.status = 500; out.code = "artifact_io_error"; out.type = "server_error"; break;
    case Kind::scope: out.status = 403; out.code = "artifact_of_another_tenant"; out.type = "permission_error"; break;
  }
  return out;
}

nlohmann::ordered_json artifact_json(std::string_view operation, const std::filesystem::path& path,
                                     const cache::ArtifactInfo& info) {
  std::string name = path.filename().string();
  name.resize(name.size() - kExtension.size());
  return {{"operation", operation}, {"name", name},        {"tokens", info.tokens},
          {"segments", info.segments}, {"checkpoints", info.checkpoints}, {"bytes", info.bytes}};
}

}  // namespace prefixd::api
