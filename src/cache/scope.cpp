#include "cache/scope.h"

#include <string>

namespace prefixd::cache {

ScopeId scope_id(std::string_view name) {
  std::string input = "prefixd.scope.v1";
  input.push_back('\0');
  input.append(name);
  return blake3_digest({reinterpret_cast<const std::uint8_t*>(input.data()), input.size()});
}

}  // namespace prefixd::cache
