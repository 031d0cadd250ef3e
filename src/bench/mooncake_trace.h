// prefixd bench — the first 187 requests of the Mooncake conversation trace (kvcache-ai/Mooncake,
// FAST25-release/traces/conversation_trace.jsonl): when each arrived, its length, and the hashes of
// its 512-token blocks, equal where two prompts share a prefix. Numbers only, no text.
#pragma once

#include <span>

namespace prefixd::bench {

struct MooncakeRequest {
  int timestamp_ms;
  int input_tokens;
  int output_tokens;
  std::span<const int> blocks;  // one id per 512 tokens of the prompt, the last block partial
};

inline constexpr int kMooncakeBlockTokens = 512;

std::span<const MooncakeRequest> mooncake_conversation_head();

}  // namespace prefixd::bench
