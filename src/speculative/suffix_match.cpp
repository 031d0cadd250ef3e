#include "speculative/suffix_match.h"

namespace prefixd::speculative {

SuffixMatch longest_suffix_match(std::span<const engine::Token> source, std::span<const engine::Token> context,
                                 std::int32_t max_length) {
  SuffixMatch best;
  if (context.empty() || source.size() < 2 || max_length <= 0) return best;
  const engine::Token last = context.back();
  const std::size_t context_end = context.size() - 1;
  for (std::size_t i = 0; i + 1 < source.size(); ++i) {
    if (source[i] != last) continue;
    std::int32_t length = 1;
    while (length < max_length && static_cast<std::size_t>(length) <= i &&
           static_cast<std::size_t>(length) <= context_end &&
           source[i - static_cast<std::size_t>(length)] == context[context_end - static_cast<std::size_t>(length)]) {
      ++length;
    }
    if (length >= best.length) best = SuffixMatch{length, i + 1};
  }
  return best;
}

}  // namespace prefixd::speculative
