#include "speculative/ngram_drafter.h"

#include <algorithm>

namespace prefixd::speculative {

Draft draft_ngram(std::span<const engine::Token> context, const OutputPool* pool, std::string_view group,
                  std::int32_t most, std::int32_t fewest) {
  Draft draft;
  if (most <= 0 || context.size() < 2) return draft;
  // The own tokens before the last one: a match there continues inside the context.
  const SuffixMatch own = longest_suffix_match(context.first(context.size() - 1), context, kLongestMatch);
  std::span<const engine::Token> continuation;
  if (own.length >= kShortestMatch) {
    continuation = context.subspan(own.next);
    draft.source = DraftSource::context;
    draft.match = own.length;
  }
  if (pool != nullptr) {
    const OutputPool::Found found = pool->find(group, context, kLongestMatch);
    if (found.match.length >= kShortestMatch && found.match.length > own.length) {
      continuation = found.continuation;
      draft.source = DraftSource::pool;
      draft.match = found.match.length;
    }
  }
  // An image's positions hold negative stand-in ids (engine::image_token_ids), which are no tokens
  // the model could be fed: a guess ends before them.
  continuation = continuation.first(static_cast<std::size_t>(
      std::ranges::find_if(continuation, [](engine::Token t) { return t < 0; }) - continuation.begin()));
  const auto length = std::min<std::size_t>(continuation.size(), static_cast<std::size_t>(most));
  if (draft.source == DraftSource::none || length < static_cast<std::size_t>(std::max(fewest, 1))) return Draft{};
  draft.tokens.assign(continuation.begin(), continuation.begin() + static_cast<std::ptrdiff_t>(length));
  return draft;
}

}  // namespace prefixd::speculative
