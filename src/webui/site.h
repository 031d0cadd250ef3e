// prefixd webui — the files of the built-in web UI and the routes that serve them.
//
// The UI is plain HTML, CSS and JavaScript modules under webui/ in the source tree, compiled into
// the binary (builtin_files.h), so it works with no network and no files installed beside the
// binary. `--webui-dir` serves a folder instead, read on every request, so the files can be edited
// without rebuilding. This component knows nothing of HTTP or the API: it maps a request path to a
// file and names its media type.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace prefixd::webui {

struct File {
  std::string content_type;
  std::string body;
};

class Site {
 public:
  // The files compiled into the binary.
  static Site builtin();
  // The files of `dir`. Throws std::runtime_error when it is not a folder with an index.html.
  static Site from_directory(const std::filesystem::path& dir);

  // The file a GET of `path` answers with: `/` and `/cache` (the pages) are index.html, `/ui/NAME`
  // the file NAME. nullopt when `path` is none of these, names no file, or names one whose type is
  // not served (only .html, .js, .css, .svg, .png, .ico and .json are).
  std::optional<File> find(std::string_view path) const;
  // True for the paths find() may answer: the UI's routes, which need no API key.
  static bool is_ui_path(std::string_view path);
  // Where the files come from, for the startup log.
  std::string origin() const;

 private:
  explicit Site(std::optional<std::filesystem::path> dir) : dir_(std::move(dir)) {}
  std::optional<File> read(std::string_view name) const;

  std::optional<std::filesystem::path> dir_;  // nullopt: the built-in files
};

}  // namespace prefixd::webui
