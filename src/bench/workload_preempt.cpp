// The preempt workload: a cache hit that arrives while a long cold prefill holds the KV memory the
// hit needs to restore its prefix. A server that makes the hit wait for the cold prompt answers it
// after the whole prefill; prefixd preempts the prefill (its computed cells kept), serves the
// hit, then resumes (docs/design.md, "Admission").
#include <algorithm>
#include <format>

#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kPreempt = 41;

}  // namespace

Workload make_preempt(const WorkloadParams& p) {
  Workload w = named_workload("preempt", "A cache hit during a long cold prefill, KV memory full", "repetition", 2,
                              plain_arms({kPreemptHitFirst, kPreemptHitDuring, kPreemptColdWithHit, kPreemptColdAlone,
                                          kPreemptHitAlone}));
  w.concurrency = 2;
  w.compare_checks = true;  // goals, not gates: a server that waits misses them
  const int hit_tokens = scaled(3500, p.scale, 96);
  const int cold_tokens = scaled(5000, p.scale, 128);
  // Some way into the cold prefill (about 100 tokens a second on the default model, two cores).
  const double delay_s = std::max(0.3, 5.0 * p.scale);
  // Less than the two prompts together, so the hit's restore does not fit beside the prefill.
  w.own_context = true;
  w.ctx_size = std::max(cold_tokens + 256, (hit_tokens + cold_tokens) * 9 / 10 / 256 * 256);
  const int reps = repetitions(p.cold_reps_long);
  for (int r = 0; r < reps; ++r) {
    const auto rep = static_cast<std::uint64_t>(r);
    Transcript hit;
    hit.add("system", text_of(derive_seed(p.seed, kPreempt, 0, rep), hit_tokens, p.words_per_token), hit_tokens);
    hit.add("user", question_of(derive_seed(p.seed, kPreempt, 1, rep), 16, p.words_per_token), 16);
    const auto cold = [&](std::uint64_t which) {
      Transcript t;
      t.add("system", text_of(derive_seed(p.seed, kPreempt, which, rep), cold_tokens, p.words_per_token), cold_tokens);
      t.add("user", question_of(derive_seed(p.seed, kPreempt, which + 1, rep), 16, p.words_per_token), 16);
      return t;
    };
    const double x = r + 1;
    const auto first = static_cast<int>(w.steps.size());
    w.steps.push_back(chat_step(kPreemptHitFirst, std::format("hit-{}", r), hit, 1, x));
    w.steps.back().barrier = true;
    w.steps.push_back(chat_step(kPreemptColdWithHit, std::format("cold-{}", r), cold(2), 1, x));
    w.steps.back().barrier = true;
    w.steps.push_back(chat_step(kPreemptHitDuring, std::format("hit-{}", r), hit, 1, x));
    w.steps.back().started = first + 1;
    w.steps.back().start_delay_s = delay_s;
    w.steps.push_back(chat_step(kPreemptColdAlone, std::format("cold-alone-{}", r), cold(4), 1, x));
    w.steps.back().barrier = true;
    w.steps.push_back(chat_step(kPreemptHitAlone, std::format("hit-{}", r), hit, 1, x));
    w.steps.back().barrier = true;
  }
  w.description = std::format(
      "A {}-token prompt is sent once (cached), then a fresh {}-token prompt (cold, max_tokens 1) and, {:.1f} s after "
      "it, the first prompt again: a hit that needs about {} KV cells while the cold prefill holds most of a "
      "{}-cell context (--parallel 2). Then a cold prompt of that size and the hit, each alone, for comparison; "
      "{} repetition(s), each with fresh prompts. A server that can only wait answers the hit after the cold "
      "prefill. The goals: the hit within a few seconds of its time alone, and the cold prompt delayed by no more "
      "than the hit's time alone. llama-server splits its context among its slots, and half of {} cells cannot "
      "hold the cold prompt, so it gets -c {} (every slot the longest prompt).",
      hit_tokens, cold_tokens, delay_s, hit_tokens, w.ctx_size, reps, w.ctx_size, context_for_workload(w));
  return w;
}

}  // namespace prefixd::bench
