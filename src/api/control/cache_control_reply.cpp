// The control plane's reply shapes, body fields and capability report.
#include <algorithm>
#include <format>

#include "api/control/cache_control_internal.h"

namespace prefixd::api {
namespace control {

ControlReply failure(std::string_view operation, const ApiError& error, const nlohmann::ordered_json& capabilities) {
  nlohmann::ordered_json body{{"supported", false},
                              {"operation", operation},
                              {"code", "prompt_cache_error"},
                              {"reason", error.code.empty() ? "invalid_request" : error.code},
                              {"message", error.message}};
  if (!error.param.empty()) body["param"] = error.param;
  body["capabilities"] = capabilities;
  body["error"] = error.to_json()["error"];
  return ControlReply{error.status, std::move(body)};
}

ControlReply unsupported(std::string_view operation, std::string why, const nlohmann::ordered_json& capabilities) {
  ApiError error{.status = 501, .message = std::move(why), .type = "invalid_request_error", .code = "prompt_cache_unsupported"};
  nlohmann::ordered_json body{{"supported", false},
                              {"operation", operation},
                              {"code", "prompt_cache_unsupported"},
                              {"message", error.message},
                              {"capabilities", capabilities},
                              {"error", error.to_json()["error"]}};
  return ControlReply{501, std::move(body)};
}

nlohmann::ordered_json success(std::string_view operation) {
  return nlohmann::ordered_json{{"supported", true}, {"operation", operation}};
}

std::expected<std::optional<std::string>, ApiError> key_name(const nlohmann::ordered_json& body, const char* field, bool required,
                                                             std::string_view fallback) {
  const auto found = body.find(field);
  if (found == body.end() || found->is_null()) {
    if (!fallback.empty()) return std::string(fallback);
    if (required) return std::unexpected(invalid_param(field, std::format("'{}' is required", field)));
    return std::nullopt;
  }
  if (!found->is_string()) return std::unexpected(invalid_param(field, std::format("'{}' must be a string", field)));
  const std::string& name = found->get_ref<const std::string&>();
  const bool printable = std::ranges::all_of(name, [](char c) { return c >= 0x20 && c < 0x7f; });
  if (name.empty() || name.size() > kMaxKeyNameBytes || !printable) {
    return std::unexpected(invalid_param(
        field, std::format("'{}' must be 1 to {} printable ASCII characters", field, kMaxKeyNameBytes)));
  }
  return name;
}

std::expected<std::optional<std::chrono::seconds>, ApiError> ttl_of(const nlohmann::ordered_json& body) {
  constexpr std::int64_t kMaxTtl = 30LL * 24 * 3600;
  const auto found = body.find("ttl_seconds");
  if (found == body.end() || found->is_null()) return std::nullopt;
  if (!found->is_number_integer() || found->get<std::int64_t>() < 1 || found->get<std::int64_t>() > kMaxTtl) {
    return std::unexpected(invalid_param("ttl_seconds", std::format("'ttl_seconds' must be an integer from 1 to {}", kMaxTtl)));
  }
  return std::chrono::seconds(found->get<std::int64_t>());
}

std::expected<std::optional<nlohmann::ordered_json>, ApiError> meta_of(const nlohmann::ordered_json& body) {
  const auto found = body.find("meta");
  if (found == body.end() || found->is_null()) return std::nullopt;
  if (!found->is_object()) return std::unexpected(invalid_param("meta", "'meta' must be an object"));
  if (found->dump().size() > kMaxMetaBytes) {
    return std::unexpected(invalid_param("meta", std::format("'meta' must be at most {} bytes as JSON", kMaxMetaBytes)));
  }
  return std::optional<nlohmann::ordered_json>(*found);
}

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace control

nlohmann::ordered_json CacheControl::capabilities() const {
  const cache::CacheConfig& config = scheduler_.cache_config();
  const bool on = config.enabled && parse_.cache_prompt_default;
  const bool artifacts = on && !options_.artifact_dir.empty();
  const bool checkpoints = resumes_at_checkpoints_;
  nlohmann::ordered_json notes = nlohmann::ordered_json::array();
  if (!on) {
    notes.push_back("The prompt cache is off (--prompt-cache-enabled false or --no-cache-prompt): nothing can be kept or steered.");
  } else {
    notes.push_back("Keys name token prefixes in the caller's tenant; the K/V is content-addressed, so keys and "
                    "requests that share a prefix share its cells, and fork copies nothing.");
    notes.push_back("Keys are not pinned: the cache's budgets, LRU and TTL still apply to their K/V; token_count "
                    "reports what is live now.");
    if (checkpoints) {
      notes.push_back("This model's memory cannot be cut back (recurrent, hybrid or sliding-window): a prefix resumes "
                      "only where a state is kept, at the end of a key or module and at checkpoints along it. A "
                      "request that edits a prompt between two checkpoints re-feeds it from the earlier one.");
    }
    if (!artifacts) notes.push_back("save and load need an artifact directory (--cache-disk-path or --cache-artifact-path).");
  }
  return nlohmann::ordered_json{
      {"supported", on},
      {"mode", on ? "local_control_plane" : "none"},
      {"supports_set", on},
      {"supports_clear", on},
      {"supports_update", on},
      {"supports_fork", on},
      {"supports_prepare_modules", on},
      {"supports_stats", true},
      {"supports_save", artifacts},
      {"supports_load", artifacts},
      {"supports_ttl", on},
      {"reuse_mode", on ? (checkpoints ? "checkpoints" : "trim") : "none"},
      {"notes", std::move(notes)},
  };
}

}  // namespace prefixd::api
