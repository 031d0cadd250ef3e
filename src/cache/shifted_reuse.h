// prefixd cache — reuse by shifting (--cache-reuse N, a request's n_cache_reuse): past the longest
// exact prefix, the chunks of at least N prompt tokens that a cached sequence holds later on are
// moved to where the prompt has them, their keys re-rotated by libllama, instead of computed. An
// edit in the middle of a long context, or a rotated ring of context chunks (code completion),
// then costs the changed tokens, not everything after them.
//
// The cells moved were computed after other tokens than the prompt has before them, so what
// attends to them is close to a cold run, not equal to it: shifted reuse is outside the exactness
// the cache otherwise keeps, opt-in, and counted apart (Acquisition::shifted, CacheStats).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cache/block_hash.h"
#include "engine/types.h"

namespace prefixd::cache {

// `length` tokens at positions [from, from + length) of the cached sequence go to [to, to + length)
// of the prompt (to <= from).
struct ShiftChunk {
  engine::Pos from = 0;
  engine::Pos to = 0;
  std::int32_t length = 0;
};

// The chunks llama-server's scan finds: from position `start` in both, a run of at least
// `min_chunk` equal tokens is taken and both heads move past it; otherwise the cached head skips a
// token. The prompt is matched only below `limit`. The chunks are contiguous in the prompt, from
// `start` on.
std::vector<ShiftChunk> find_shift_chunks(std::span<const engine::Token> cached, std::span<const engine::Token> prompt,
                                          std::int32_t start, std::int32_t min_chunk, std::int32_t limit);

std::int32_t shifted_tokens(std::span<const ShiftChunk> chunks);

// Where a request's chunks come from: a device entry (`entry`), or else a chain of host segments
// from position 0 (`host_path`, in position order; restored from disk files when `from_disk`);
// `tokens` are the donor's.
struct ShiftDonor {
  std::optional<std::uint64_t> entry;
  std::vector<Digest> host_path;
  std::vector<engine::Token> tokens;
  bool from_disk = false;
};

}  // namespace prefixd::cache
