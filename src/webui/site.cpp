#include "webui/site.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "webui/builtin_files.h"

namespace prefixd::webui {
namespace {

constexpr std::string_view kAssetPrefix = "/ui/";

struct MediaType {
  std::string_view extension;
  std::string_view content_type;
};
constexpr std::array kMediaTypes = {
    MediaType{".html", "text/html; charset=utf-8"},  MediaType{".js", "text/javascript; charset=utf-8"},
    MediaType{".css", "text/css; charset=utf-8"},    MediaType{".svg", "image/svg+xml"},
    MediaType{".png", "image/png"},                  MediaType{".ico", "image/x-icon"},
    MediaType{".json", "application/json"},
};

std::optional<std::string_view> content_type_of(std::string_view name) {
  for (const auto& m : kMediaTypes) {
    if (name.ends_with(m.extension)) return m.content_type;
  }
  return std::nullopt;
}

// A name under the UI's folder: segments of letters, digits, '-', '_' and '.', none empty and none
// starting with '.', so that no request can leave the folder or reach a hidden file.
bool is_safe_name(std::string_view name) {
  if (name.empty() || name.size() > 200) return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t slash = std::min(name.find('/', start), name.size());
    const std::string_view segment = name.substr(start, slash - start);
    if (segment.empty() || segment.front() == '.') return false;
    for (const char c : segment) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
      if (!ok) return false;
    }
    start = slash + 1;
  }
  return true;
}

// The file name a UI path stands for; nullopt for any other path.
std::optional<std::string_view> name_of(std::string_view path) {
  if (path == "/" || path == "/cache") return "index.html";
  if (path.starts_with(kAssetPrefix)) return path.substr(kAssetPrefix.size());
  return std::nullopt;
}

}  // namespace

Site Site::builtin() { return Site(std::nullopt); }

Site Site::from_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw std::runtime_error(dir.string() + " is not a folder");
  if (!std::filesystem::is_regular_file(dir / "index.html", ec)) {
    throw std::runtime_error(dir.string() + " has no index.html");
  }
  return Site(std::filesystem::canonical(dir));
}

bool Site::is_ui_path(std::string_view path) { return name_of(path).has_value(); }

std::string Site::origin() const { return dir_ ? dir_->string() : "built into the binary"; }

std::optional<File> Site::find(std::string_view path) const {
  const auto name = name_of(path);
  if (!name || !is_safe_name(*name)) return std::nullopt;
  return read(*name);
}

std::optional<File> Site::read(std::string_view name) const {
  const auto type = content_type_of(name);
  if (!type) return std::nullopt;
  if (!dir_) {
    for (const BuiltinFile& f : builtin_files()) {
      if (f.name == name) return File{std::string(*type), std::string(f.bytes.begin(), f.bytes.end())};
    }
    return std::nullopt;
  }
  const std::filesystem::path file = *dir_ / std::filesystem::path(name);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream body;
  body << in.rdbuf();
  return File{std::string(*type), std::move(body).str()};
}

}  // namespace prefixd::webui
