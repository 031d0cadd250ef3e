#include "cache/shifted_reuse.h"

#include <algorithm>

namespace prefixd::cache {

std::vector<ShiftChunk> find_shift_chunks(std::span<const engine::Token> cached, std::span<const engine::Token> prompt,
                                          std::int32_t start, std::int32_t min_chunk, std::int32_t limit) {
  std::vector<ShiftChunk> out;
  if (min_chunk <= 0 || start < 0) return out;
  const auto cached_end = static_cast<std::int32_t>(cached.size());
  const std::int32_t prompt_end = std::min(limit, static_cast<std::int32_t>(prompt.size()));
  std::int32_t head_cached = start;
  std::int32_t head_prompt = start;
  while (head_cached < cached_end && head_prompt < prompt_end) {
    std::int32_t run = 0;
    while (head_cached + run < cached_end && head_prompt + run < prompt_end &&
           cached[static_cast<std::size_t>(head_cached + run)] == prompt[static_cast<std::size_t>(head_prompt + run)]) {
      ++run;
    }
    if (run >= min_chunk) {
      out.push_back({.from = head_cached, .to = head_prompt, .length = run});
      head_cached += run;
      head_prompt += run;
    } else {
      ++head_cached;
    }
  }
  return out;
}

std::int32_t shifted_tokens(std::span<const ShiftChunk> chunks) {
  std::int32_t n = 0;
  for (const auto& c : chunks) n += c.length;
  return n;
}

}  // namespace prefixd::cache
