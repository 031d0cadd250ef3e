// prefixd speculative — whether a draft model's token ids mean what the target's do. A drafter
// guesses token ids the target verifies, and is fed the target's tokens: every id both use must
// spell the same bytes and end generation alike. Vocabularies of one family often differ only in
// the padding rows at their end (a small model's embedding table rounded to another multiple), so
// sizes may differ by up to kMaxVocabularyPadding; the ids beyond the smaller one are never fed to
// the drafter nor taken from it (the scheduler's guard).
// Must not know: the scheduler, the cache, the model runtime (the Vocabulary interface only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine.h"

namespace prefixd::speculative {

inline constexpr std::int32_t kMaxVocabularyPadding = 128;

// The first difference that makes `drafter` unusable for `target`, in words naming the token id
// and both spellings; nullopt when they match.
std::optional<std::string> vocabulary_difference(const engine::Vocabulary& target, const engine::Vocabulary& drafter);

}  // namespace prefixd::speculative
