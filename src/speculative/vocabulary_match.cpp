#include "speculative/vocabulary_match.h"

#include <algorithm>
#include <cstdlib>
#include <format>

namespace prefixd::speculative {

namespace {

// A token's bytes for a message: printable ASCII as is, the rest escaped, long ones cut.
std::string shown(const std::string& piece) {
  std::string out;
  for (const char c : piece.substr(0, 40)) {
    const auto byte = static_cast<unsigned char>(c);
    out += byte >= 0x20 && byte < 0x7f && c != '"' && c != '\\' ? std::string(1, c) : std::format("\\x{:02x}", byte);
  }
  return "\"" + out + (piece.size() > 40 ? "...\"" : "\"");
}

}  // namespace

std::optional<std::string> vocabulary_difference(const engine::Vocabulary& target, const engine::Vocabulary& drafter) {
  const std::int32_t sizes_differ_by = std::abs(target.size() - drafter.size());
  if (sizes_differ_by > kMaxVocabularyPadding) {
    return std::format("the target has {} tokens and the drafter {}: more than {} apart", target.size(), drafter.size(),
                       kMaxVocabularyPadding);
  }
  const std::int32_t common = std::min(target.size(), drafter.size());
  for (engine::Token id = 0; id < common; ++id) {
    const std::string a = target.piece(id, true);
    const std::string b = drafter.piece(id, true);
    if (a != b) return std::format("token {} is {} in the target and {} in the drafter", id, shown(a), shown(b));
    if (target.is_end_of_generation(id) != drafter.is_end_of_generation(id)) {
      return std::format("token {} ({}) ends generation in the {} only", id, shown(a),
                         target.is_end_of_generation(id) ? "target" : "drafter");
    }
  }
  return std::nullopt;
}

}  // namespace prefixd::speculative
