// Probe workloads: one prompt sent again and again (resend, restart) and one system prompt shared
// by many users at once (shared). Default sizes are a quarter of the (BENCH_SCALE=4 gives
// 1k–8k resends and a 2k shared system prompt) so `make bench` fits 45 minutes on two cores.
#include <format>

#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kResend = 1;
constexpr std::uint64_t kShared = 2;
constexpr std::uint64_t kRestart = 3;

}  // namespace

Workload make_resend(const WorkloadParams& p) {
  Workload w = named_workload("resend", "Identical resend (prefill probe)", "prompt tokens", 1);
  std::vector<int> lengths;
  for (int base : {256, 512, 1024, 2048}) lengths.push_back(scaled(base, p.scale, 16));
  w.description = std::format(
      "One user message of {} tokens, max_tokens 1 (the first token is the whole answer, so TTFT is the prefill). "
      "Cold: a prompt neither server has seen (a new text per repetition); warm: the last cold prompt again, "
      "byte for byte. --parallel 1.",
      [&] {
        std::string s;
        for (int n : lengths) s += (s.empty() ? "" : ", ") + std::to_string(n);
        return s;
      }());
  for (int n : lengths) {
    w.arms.push_back({.name = std::format("cold {}", n), .cold = true, .pinned = true});
    w.arms.push_back({.name = std::format("warm {}", n), .pinned = true});
  }
  // Longest first, so the gates replay the shortest prompt (a cold replay costs a full prefill).
  for (std::size_t i = lengths.size(); i-- > 0;) {
    const int n = lengths[i];
    const int cold_reps = repetitions(i >= 2 ? p.cold_reps_long : p.reps);
    Transcript prompt;
    std::string session;
    for (int c = 0; c < cold_reps; ++c) {
      prompt = Transcript();
      prompt.add("user", text_of(derive_seed(p.seed, kResend, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(c)), n,
                                 p.words_per_token),
                 n);
      session = std::format("resend-{}-{}", n, c);
      w.steps.push_back(chat_step(std::format("cold {}", n), session, prompt, 1, n));
    }
    for (int r = 0; r < repetitions(p.reps); ++r) w.steps.push_back(chat_step(std::format("warm {}", n), session, prompt, 1, n));
  }
  return w;
}

Workload make_shared(const WorkloadParams& p) {
  constexpr int kUsers = 32;
  constexpr int kWave = 8;
  Workload w = named_workload("shared", "Shared system prompt", "request", 4, plain_arms({"wave 1", "waves 2–4"}));
  w.concurrency = kWave;
  w.measure_sharing = true;
  const int system_tokens = scaled(512, p.scale, 16);
  w.description = std::format(
      "{} users, one {}-token system prompt, a short distinct question each (log-normal, median {} tokens), sent {} at "
      "a time (each wave waits for the previous one), max_tokens 4. --parallel 4 on both servers.",
      kUsers, system_tokens, scaled(8, p.scale, 4), kWave);
  const std::string system = text_of(derive_seed(p.seed, kShared, 0), system_tokens, p.words_per_token);
  SeededRng rng(derive_seed(p.seed, kShared, 1));
  for (int u = 0; u < kUsers; ++u) {
    const int q = draw_length(rng, {.median = 8, .sigma = 0.5, .lo = 4, .hi = 64}, p.scale);
    Transcript t;
    t.add("system", system, system_tokens);
    t.add("user", question_of(derive_seed(p.seed, kShared, 2, static_cast<std::uint64_t>(u)), q, p.words_per_token), q);
    Step step = chat_step(u < kWave ? "wave 1" : "waves 2–4", std::format("shared-user-{}", u), t, 4, u + 1);
    step.barrier = u > 0 && u % kWave == 0;
    w.steps.push_back(std::move(step));
  }
  return w;
}

Workload make_restart(const WorkloadParams& p) {
  // The after-restart arm is a re-prefill only on a server without a disk tier, so it is not
  // marked cold: its spread is not the machine's noise.
  Workload w = named_workload("restart", "Restart", "request", 1,
                              {{.name = kRestartColdArm, .cold = true, .pinned = true},
                               {.name = kRestartWarmArm, .pinned = true},
                               {.name = kRestartArm, .pinned = true}});
  w.disk_tier = true;
  w.compare_checks = true;
  const int n = scaled(512, p.scale, 16);
  w.description = std::format(
      "One {}-token prompt (max_tokens 1) sent once (cold), then {} times warm (from the server's memory); then {} "
      "times: restart the server, resend. prefixd runs with a disk tier (`--cache-disk-path`: a fresh directory per "
      "run that outlives the restarts and is removed at the end); before each request the harness waits until its "
      "write-behind is done (queue empty, files settled), and before each after-restart request it drops the tier's "
      "files from the page cache, so the restore reads the disk as after a reboot. llama-server keeps its prompt "
      "cache in memory (--cache-ram) and writes a slot to disk only when a client asks (/slots save and restore with "
      "--slot-save-path), so after a restart it prefills the whole prompt again. --parallel 1.",
      n, p.reps, p.reps);
  Transcript t;
  t.add("user", text_of(derive_seed(p.seed, kRestart, 0), n, p.words_per_token), n);
  auto add = [&](const std::string& arm, bool restart) {
    Step step = chat_step(arm, "restart", t, 1, static_cast<double>(w.steps.size() + 1));
    step.restart_before = restart;
    w.steps.push_back(std::move(step));
  };
  add(kRestartColdArm, false);
  for (int r = 0; r < repetitions(p.reps); ++r) add(kRestartWarmArm, false);
  for (int r = 0; r < repetitions(p.reps); ++r) add(kRestartArm, true);
  return w;
}

}  // namespace prefixd::bench
