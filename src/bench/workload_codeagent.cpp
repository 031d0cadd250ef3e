// 48 coding agents at once against one server, with the token shapes of public SWE-bench
// trajectories (bench/coding_agent_trace.h): each session's first prompt, what every later call
// appends (the tool's output), what each call writes, and the time between calls. The lengths are
// divided to fit two cores; the order of events within a session is the trace's.
#include <algorithm>
#include <format>

#include "bench/coding_agent_trace.h"
#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kCodeAgent = 51;
// Every trace length (tokens, seconds) is divided by this at BENCH_SCALE 1: the 48 sessions hold
// 1.2 million tokens of history and write 612 thousand, days of work for two cores; so divided,
// a run takes about eight minutes on two cores.
constexpr int kDivisor = 64;
// The longest reply, before BENCH_SCALE: one trace call wrote 44 thousand tokens in a repetition
// loop; 48 is above the trace's 99th percentile (3,454) divided as the rest.
constexpr int kReplyCap = 48;

int shrunk(int trace_tokens, double scale, int floor) {
  return scaled(std::max(1, (trace_tokens + kDivisor / 2) / kDivisor), scale, floor);
}

}  // namespace

Workload make_codeagent(const WorkloadParams& p) {
  const auto sessions = coding_agent_sessions();
  const int slots = 4;
  Workload w = named_workload("codeagent", "48 coding agents (SWE-bench trajectory shapes)", "request", slots,
                              plain_arms({"first call", "later calls"}));
  w.concurrency = static_cast<int>(sessions.size());
  w.latency = true;
  const int system_tokens = shrunk(kTraceSystemTokens, p.scale, 4);
  const int reply_cap = scaled(kReplyCap, p.scale, 4);
  const std::string system = text_of(derive_seed(p.seed, kCodeAgent, 0), system_tokens, p.words_per_token);

  // Each session's transcript grows call by call; the steps go out round-robin over the sessions
  // (every session's first call, then every second call, …), each waiting for its own session.
  std::vector<Transcript> transcripts(sessions.size());
  std::vector<int> last_step(sessions.size(), -1);
  std::size_t longest = 0;
  for (const auto& s : sessions) longest = std::max(longest, s.turns.size());
  for (std::size_t k = 0; k < longest; ++k) {
    for (std::size_t i = 0; i < sessions.size(); ++i) {
      const TraceSession& s = sessions[i];
      if (k >= s.turns.size()) continue;
      const TraceTurn& turn = s.turns[k];
      Transcript& t = transcripts[i];
      const auto tag = static_cast<std::uint64_t>(i) * 1000 + k;
      if (k == 0) {
        t.add("system", system, system_tokens);
        const int task_tokens = shrunk(s.first_prompt_tokens - kTraceSystemTokens, p.scale, 8);
        t.add("user", text_of(derive_seed(p.seed, kCodeAgent, 1, i), task_tokens, p.words_per_token), task_tokens);
      } else {
        const TraceTurn& previous = s.turns[k - 1];
        const int wrote = std::min(shrunk(previous.output_tokens, p.scale, 2), reply_cap);
        t.add("assistant", text_of(derive_seed(p.seed, kCodeAgent, 2, tag - 1), wrote, p.words_per_token), wrote);
        const int appended = shrunk(turn.appended_tokens, p.scale, 2);
        t.add("user", text_of(derive_seed(p.seed, kCodeAgent, 3, tag), appended, p.words_per_token), appended);
      }
      const int reply = std::min(shrunk(turn.output_tokens, p.scale, 2), reply_cap);
      Step step = chat_step(k == 0 ? "first call" : "later calls", std::format("codeagent-{}", s.id), t, reply,
                            static_cast<double>(w.steps.size() + 1));
      step.body_fields = {{"ignore_eos", true}};
      step.after = last_step[i];
      if (turn.gap_seconds > 0) step.after_delay_s = turn.gap_seconds / static_cast<double>(kDivisor);
      w.steps.push_back(std::move(step));
      last_step[i] = static_cast<int>(w.steps.size()) - 1;
    }
  }
  long histories = 0;  // every session's last call with its reply
  for (const int i : last_step) {
    const Step& last = w.steps[static_cast<std::size_t>(i)];
    histories += last.planned_tokens + last.max_tokens;
  }
  w.description = std::format(
      "{} coding-agent sessions at once, each a public SWE-bench Verified trajectory of mini-swe-agent "
      "(bench/data/coding_agent_sessions.md): its first prompt (a {}-token system prompt shared by all, then its "
      "task), then per model call what the agent appended (the tool's output) and what the call wrote, in the "
      "trace's order; every length divided by {} (the sessions hold 1.2 million tokens of history in full) and a "
      "reply at most {} tokens (the trace's 99th percentile is 3,454, divided: {}); ignore_eos, so both servers "
      "write the same count. A session's next call waits for its previous reply and then the trace's time between "
      "the two calls divided by {} (that gap includes the traced model's own writing, so the tool's time is "
      "overstated). Memory pressure: the sessions' histories add up to about {:.1f} times the context, which both "
      "servers get equal (every slot can hold the longest call). --parallel {} on both servers.",
      sessions.size(), system_tokens, kDivisor / p.scale, reply_cap, 3454 / kDivisor, kDivisor,
      static_cast<double>(histories) / context_for_workload(w), slots);
  return w;
}

}  // namespace prefixd::bench
