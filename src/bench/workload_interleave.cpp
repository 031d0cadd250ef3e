// The interleaved long/short workload: many conversations whose prompts range from a hundred to a
// few thousand tokens, served in turn on one slot, so that every request follows a different
// conversation and the context is filled, emptied and filled again. It shows what a server pays per
// request once its context has held long prompts: a cold prefill of every first turn, and for every
// later turn a restore of its conversation from wherever the server kept it.
#include <format>

#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kInterleave = 15;
constexpr int kConversations = 24;
constexpr int kTurns = 3;
constexpr int kReply = 8;  // generated tokens per turn

}  // namespace

Workload make_interleave(const WorkloadParams& p) {
  Workload w = named_workload("interleave", "Interleaved long and short conversations", "request", 1,
                              plain_arms({"first turns", "later turns"}));
  // A quarter of the full sizes at scale 1, like the other workloads (BENCH_SCALE=4: 96 to 3,200).
  const int shortest = scaled(24, p.scale, 16);
  const int longest = scaled(800, p.scale, 64);
  const int user_tokens = scaled(6, p.scale, 4);
  const int reply_tokens = scaled(8, p.scale, 4);
  w.description = std::format(
      "{} conversations of {} turns on one slot, served round-robin (every conversation's first turn, then every "
      "second turn, ...), so consecutive requests never share a prompt. Their system prompts spread from {} to {} "
      "tokens in an order that alternates long and short; each turn adds a {}-token question after a {}-token "
      "assistant reply (written by the generator). max_tokens {}. --parallel 1.",
      kConversations, kTurns, shortest, longest, user_tokens, reply_tokens, kReply);
  std::vector<Transcript> transcripts;
  for (int c = 0; c < kConversations; ++c) {
    // 7 and 24 are coprime: positions 0, 7, 14, 21, 4, ... visit every length once, long and short mixed.
    const int rank = (c * 7) % kConversations;
    const int system_tokens = shortest + (longest - shortest) * rank / (kConversations - 1);
    Transcript t;
    t.add("system", text_of(derive_seed(p.seed, kInterleave, 0, static_cast<std::uint64_t>(c)), system_tokens, p.words_per_token),
          system_tokens);
    transcripts.push_back(std::move(t));
  }
  for (int turn = 0; turn < kTurns; ++turn) {
    for (int c = 0; c < kConversations; ++c) {
      Transcript& t = transcripts[static_cast<std::size_t>(c)];
      const auto k = derive_seed(p.seed, kInterleave, 1 + static_cast<std::uint64_t>(c), static_cast<std::uint64_t>(turn));
      if (turn > 0) t.add("assistant", text_of(derive_seed(k, 1), reply_tokens, p.words_per_token), reply_tokens);
      t.add("user", question_of(derive_seed(k, 2), user_tokens, p.words_per_token), user_tokens);
      Step step = chat_step(turn == 0 ? "first turns" : "later turns", std::format("interleave-{}", c), t, kReply,
                            static_cast<double>(w.steps.size() + 1));
      if (turn > 0) step.after = static_cast<int>(w.steps.size()) - kConversations;
      w.steps.push_back(std::move(step));
    }
  }
  return w;
}

}  // namespace prefixd::bench
