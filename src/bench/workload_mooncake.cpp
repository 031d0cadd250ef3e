// The first 187 requests of the Mooncake conversation trace (bench/mooncake_trace.h), one after
// another: every 512-token block id becomes a block of text of its own, so two prompts share
// exactly the prefix their block ids share; lengths divided to fit two cores.
#include <format>
#include <set>

#include "bench/mooncake_trace.h"
#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kMooncake = 52;
// Trace lengths are divided by this at BENCH_SCALE 1 (a block of 512 tokens becomes 16): the 187
// requests hold 2.6 million prompt tokens in full.
constexpr int kDivisor = 32;

}  // namespace

Workload make_mooncake(const WorkloadParams& p) {
  const auto requests = mooncake_conversation_head();
  Workload w = named_workload("mooncake", "Mooncake conversation trace, first 187 requests", "request", 1,
                              plain_arms({"new prefix", "continues an earlier prompt"}));
  const int block_tokens = scaled(kMooncakeBlockTokens / kDivisor, p.scale, 2);
  w.description = std::format(
      "The first {} requests of the Mooncake conversation trace (kvcache-ai/Mooncake, FAST25-release; "
      "bench/data/mooncake_conversation_head.jsonl), in the trace's order, one at a time: each 512-token block id "
      "becomes {} tokens of text of its own (every length divided by {}), so two prompts share exactly the blocks "
      "the trace says they share, sent as a raw /v1/completions prompt; max_tokens 1. The rows: prompts that share "
      "more than the first block with an earlier one, and the rest. --parallel 1 on both servers.",
      requests.size(), block_tokens, kMooncakeBlockTokens * 1.0 / block_tokens);
  std::set<int> seen;
  for (const MooncakeRequest& r : requests) {
    std::string prompt;
    int tokens = 0;
    std::size_t shared = 0;
    bool sharing = true;
    for (std::size_t b = 0; b < r.blocks.size(); ++b) {
      const int id = r.blocks[b];
      sharing = sharing && seen.contains(id);
      if (sharing) ++shared;
      // The last block holds what is left of the prompt; a shorter text of the same seed is the
      // start of the longer one, so a partial block shares its start with the full one.
      const int trace_tokens = b + 1 < r.blocks.size()
                                   ? kMooncakeBlockTokens
                                   : r.input_tokens - kMooncakeBlockTokens * static_cast<int>(b);
      const int n = std::max(1, block_tokens * trace_tokens / kMooncakeBlockTokens);
      if (!prompt.empty()) prompt += ' ';
      prompt += text_of(derive_seed(p.seed, kMooncake, static_cast<std::uint64_t>(id)), n, p.words_per_token);
      tokens += n;
    }
    for (const int id : r.blocks) seen.insert(id);
    w.steps.push_back({.arm = shared > 1 ? "continues an earlier prompt" : "new prefix",
                       .session = "mooncake",
                       .prompt = std::move(prompt),
                       .max_tokens = 1,
                       .planned_tokens = tokens,
                       .x = static_cast<double>(w.steps.size() + 1)});
  }
  return w;
}

}  // namespace prefixd::bench
