// prefixd speculative — n-gram drafting: guessing a request's next tokens from text it has seen,
// with no second model. Two sources, the better match winning:
//  - the request's own tokens (prompt lookup): an edit that repeats a file, a reply that quotes
//    the prompt or repeats itself;
//  - the OutputPool: the replies its namespace produced earlier, so a retried or regenerated
//    request drafts its own earlier answer.
// DraftPacing keeps the cost of wrong guesses small: it shortens and then pauses drafting while
// drafts are rejected, and lengthens it while they are accepted.
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

// Where a draft came from.
enum class DraftSource { none, context, pool };

struct Draft {
  std::vector<engine::Token> tokens;
  DraftSource source = DraftSource::none;
};

// Up to `most` tokens guessed to follow `context`; none when no source matches at least
// kShortestMatch tokens or the best continuation is shorter than `fewest`. `pool` may be null
// (the request does not read the cache's namespace).
Draft draft_ngram(std::span<const engine::Token> context, const OutputPool* pool, std::string_view group,
                  std::int32_t most, std::int32_t fewest);

// How many tokens one request drafts at its next decode step. Starts at the most; after a
// verification that accepted every drafted token it doubles (up to the most), after a partial
// one it is what was accepted plus one, and after one that accepted nothing it falls to the
// fewest and drafting pauses for 1, 2, 4 ... 64 steps as such verifications follow each other.
class DraftPacing {
 public:
  static constexpr std::int32_t kLongestPause = 64;

  DraftPacing(std::int32_t most, std::int32_t fewest) : most_(most), fewest_(fewest), length_(most) {}

  // Tokens to draft at this decode step (0: none); counts a paused step.
  std::int32_t next_length();
  void observe(std::int32_t drafted, std::int32_t accepted);

  std::int32_t most() const { return most_; }
  std::int32_t fewest() const { return fewest_; }

 private:
  std::int32_t most_;
  std::int32_t fewest_;
  std::int32_t length_;
  std::int32_t pause_ = 0;
  std::int32_t misses_ = 0;  // verifications in a row that accepted nothing
};

}  // namespace prefixd::speculative
