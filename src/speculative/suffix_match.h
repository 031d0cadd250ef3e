// prefixd speculative — where a token sequence's ending was seen before: the lookup n-gram
// drafting makes in a request's own tokens and in the outputs a namespace produced earlier.
// Must not know: the scheduler, the cache, the model runtime (only token ids).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/types.h"

namespace prefixd::speculative {

// A place in a source whose preceding tokens repeat the context's last `length` tokens, so that
// source[next...] is a guess at what follows the context.
struct SuffixMatch {
  std::int32_t length = 0;  // tokens matched (0: no match)
  std::size_t next = 0;     // index in the source of the first token after the match
};

// The longest match of the end of `context` (up to `max_length` tokens) that ends at some index i
// of `source` with i + 1 < source.size() (a token follows it); among equally long ones, the last
// in the source (the most recent text). One pass over the source; only positions holding the
// context's last token are compared further.
SuffixMatch longest_suffix_match(std::span<const engine::Token> source, std::span<const engine::Token> context,
                                 std::int32_t max_length);

}  // namespace prefixd::speculative
