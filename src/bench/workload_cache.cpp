// Cache-behaviour workloads: a growing chat (grow), sessions rotating through one slot (thrash),
// simultaneous requests sharing a prefix (burst), and prompts with nothing to reuse (unique).
// `prefixd-bench bench` checks what prefixd's cache should do on each (bench/checks.h); `unique`
// measures what the cache costs when it cannot help.
#include <format>

#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kGrow = 21;
constexpr std::uint64_t kThrash = 22;
constexpr std::uint64_t kBurst = 23;
constexpr std::uint64_t kUnique = 24;
constexpr int kChatReply = 8;  // generated tokens per chat turn

}  // namespace

Workload make_grow(const WorkloadParams& p) {
  constexpr int kTurns = 8;
  Workload w = named_workload("grow", "Growing chat", "turn", 1, plain_arms({"turn 1", "turns 2–8"}));
  const int system_tokens = scaled(256, p.scale, 16);
  const int user_tokens = scaled(16, p.scale, 4);
  const int reply_tokens = scaled(32, p.scale, 8);
  w.description = std::format(
      "One conversation of {} turns under one cache key: a {}-token system prompt, then per turn a {}-token question; "
      "each turn resends the whole transcript with the earlier replies ({} tokens each, written by the generator). "
      "max_tokens {}. --parallel 1.",
      kTurns, system_tokens, user_tokens, reply_tokens, kChatReply);
  Transcript t;
  t.add("system", text_of(derive_seed(p.seed, kGrow, 0), system_tokens, p.words_per_token), system_tokens);
  for (int turn = 1; turn <= kTurns; ++turn) {
    const auto k = static_cast<std::uint64_t>(turn);
    if (turn > 1) t.add("assistant", text_of(derive_seed(p.seed, kGrow, 2, k), reply_tokens, p.words_per_token), reply_tokens);
    t.add("user", question_of(derive_seed(p.seed, kGrow, 1, k), user_tokens, p.words_per_token), user_tokens);
    w.steps.push_back(chat_step(turn == 1 ? "turn 1" : "turns 2–8", "grow", t, kChatReply, turn));
  }
  return w;
}

Workload make_thrash(const WorkloadParams& p) {
  constexpr int kSessions = 3;
  Workload w = named_workload("thrash", "Sessions rotating through one slot", "request", 1,
                              plain_arms({"round 1", "round 2"}));
  const int history_tokens = scaled(256, p.scale, 16);
  const int user_tokens = scaled(12, p.scale, 4);
  const int reply_tokens = scaled(16, p.scale, 4);
  w.description = std::format(
      "--parallel 1; {} sessions with distinct {}-token histories take turns: A B C, then A B C again with the reply "
      "and one more question each. A cache that keeps only the slot's last prompt evaluates every history twice. "
      "max_tokens {}.",
      kSessions, history_tokens, kChatReply);
  std::vector<Transcript> sessions(kSessions);
  for (int round = 1; round <= 2; ++round) {
    for (int s = 0; s < kSessions; ++s) {
      const auto id = static_cast<std::uint64_t>(s);
      Transcript& t = sessions[static_cast<std::size_t>(s)];
      if (round == 1) {
        t.add("system", text_of(derive_seed(p.seed, kThrash, 0, id), history_tokens, p.words_per_token), history_tokens);
      } else {
        t.add("assistant", text_of(derive_seed(p.seed, kThrash, 2, id), reply_tokens, p.words_per_token), reply_tokens);
      }
      const auto question_seed = derive_seed(p.seed, kThrash, 1 + static_cast<std::uint64_t>(round) * 16, id);
      t.add("user", question_of(question_seed, user_tokens, p.words_per_token), user_tokens);
      w.steps.push_back(chat_step(std::format("round {}", round), std::format("thrash-{}", static_cast<char>('A' + s)), t,
                                  kChatReply, static_cast<double>(w.steps.size() + 1)));
    }
  }
  return w;
}

Workload make_burst(const WorkloadParams& p) {
  constexpr int kRequests = 8;
  Workload w = named_workload("burst", "Burst sharing one prefix", "request", 4, {{.name = "burst", .pinned = true}});
  w.concurrency = kRequests;
  w.measure_sharing = true;
  const int prefix_tokens = scaled(512, p.scale, 16);
  const int question_tokens = scaled(20, p.scale, 4);
  w.description = std::format(
      "{} requests sent at once (all in flight together), one {}-token system prompt, a distinct {}-token question "
      "each, max_tokens 1. --parallel 4: the prefix should be evaluated once, not once per request that arrived "
      "before it was cached.",
      kRequests, prefix_tokens, question_tokens);
  const std::string system = text_of(derive_seed(p.seed, kBurst, 0), prefix_tokens, p.words_per_token);
  for (int r = 0; r < kRequests; ++r) {
    Transcript t;
    t.add("system", system, prefix_tokens);
    t.add("user", question_of(derive_seed(p.seed, kBurst, 1, static_cast<std::uint64_t>(r)), question_tokens, p.words_per_token),
          question_tokens);
    w.steps.push_back(chat_step("burst", std::format("burst-{}", r), t, 1, r + 1));
  }
  return w;
}

Workload make_unique(const WorkloadParams& p) {
  constexpr int kClients = 4;
  constexpr int kPerClient = 4;
  constexpr int kGenerated = 32;
  Workload w = named_workload("unique", "Nothing to reuse (throughput)", "request", kClients, plain_arms({"unique"}));
  w.concurrency = kClients;
  w.throughput = true;
  const int prompt_tokens = scaled(192, p.scale, 16);
  w.description = std::format(
      "{} clients, {} requests each, every prompt distinct from its first token (a raw /v1/completions prompt that "
      "starts with its own nonce), {} tokens, max_tokens {}. No prefix can be reused, so this measures what the cache "
      "costs: prompt and generation tokens per second over the run, e.g. prefixd against prefixd "
      "--no-cache-prompt. --parallel {}.",
      kClients, kPerClient, prompt_tokens, kGenerated, kClients);
  for (int r = 0; r < kClients * kPerClient; ++r) {
    const auto seed = derive_seed(p.seed, kUnique, static_cast<std::uint64_t>(r));
    std::string prompt = std::format("{:016x} ", seed) + text_of(seed, prompt_tokens, p.words_per_token);
    w.steps.push_back({.arm = "unique",
                       .session = std::format("unique-{}", r),
                       .prompt = std::move(prompt),
                       .max_tokens = kGenerated,
                       .planned_tokens = prompt_tokens + 8,
                       .x = static_cast<double>(r + 1)});
  }
  return w;
}

}  // namespace prefixd::bench
