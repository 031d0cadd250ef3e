// prefixd speculative — n-gram drafting: guessing a request's next tokens from text it has seen,
// with no second model. Two sources, the better match winning:
//  - the request's own tokens (prompt lookup): an edit that repeats a file, a reply that quotes
//    the prompt or repeats itself;
//  - the OutputPool: the replies its namespace produced earlier, so a retried or regenerated
//    request drafts its own earlier answer.
// Must not know: the scheduler, the cache, the model runtime (only token ids).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/types.h"
#include "speculative/output_pool.h"

namespace prefixd::speculative {

// A match must repeat at least this many tokens of the context's end to be drafted from; longer
// matches than kLongestMatch are not told apart.
inline constexpr std::int32_t kShortestMatch = 3;
inline constexpr std::int32_t kLongestMatch = 32;
static_assert(kShortestMatch >= OutputPool::kIndexedTokens, "the pool finds no match shorter than its indexed runs");

// Where a draft came from.
enum class DraftSource { none, context, pool };

struct Draft {
  std::vector<engine::Token> tokens;
  DraftSource source = DraftSource::none;
  std::int32_t match = 0;  // context tokens the source repeated before the draft
};

// Up to `most` tokens guessed to follow `context`; none when no source matches at least
// kShortestMatch tokens or the best continuation is shorter than `fewest`. A guess never holds an
// image's stand-in ids (negative): it ends before the first. `pool` may be null
// (the request does not read the cache's namespace).
Draft draft_ngram(std::span<const engine::Token> context, const OutputPool* pool, std::string_view group,
                  std::int32_t most, std::int32_t fewest);

}  // namespace prefixd::speculative
