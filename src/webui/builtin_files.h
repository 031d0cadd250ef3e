// prefixd webui — the web UI's files as compiled into the binary. The definition is generated at
// build time from the webui/ folder (cmake/embed_files.cmake).
#pragma once

#include <span>
#include <string_view>

namespace prefixd::webui {

struct BuiltinFile {
  std::string_view name;  // path under webui/, '/'-separated
  std::span<const unsigned char> bytes;
};

std::span<const BuiltinFile> builtin_files();

}  // namespace prefixd::webui
