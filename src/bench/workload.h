// prefixd bench — the workloads every target is driven with. A workload is a pure function of
// (seed, scale, words per token): the same arguments give the same requests, byte for byte, so
// every server sees identical traffic and a rerun sees the traffic of the last run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

// One chat request of a workload.
struct Step {
  std::string arm;             // the table row it counts towards: "cold 512", "turn 3", ...
  std::string session;         // sent as prompt_cache_key and user
  nlohmann::json messages;     // OpenAI chat messages (/v1/chat/completions)
  std::string prompt;          // non-empty: raw text for /v1/completions instead of messages, so
                               // the prompt's first token is its own (no chat template in front)
  nlohmann::json tools;        // non-null: the chat request's `tools`
  nlohmann::json body_fields;  // non-null: an object of further chat body fields (tool_choice, ...)
  // Non-null: not a chat but llama-server's POST /infill with these fields (input_prefix,
  // input_suffix, input_extra, prompt, ...); max_tokens goes as n_predict.
  nlohmann::json infill;
  // > 0: the client hangs up when the reply has not ended this many seconds after it was sent, as
  // an editor drops a completion the user typed past (CompletionResult::cancelled).
  double cancel_after_s = 0;
  // >= 0: the next turn of an agent loop, whose messages depend on the server's reply to that
  // earlier step: its messages as sent, then the assistant's reply with its tool_calls, then one
  // tool message per call with `tool_result` (bench/next_turn.h). `messages` holds the turn's
  // planned shape only; `after` must name the same step.
  int continues = -1;
  std::string tool_result;
  // Non-empty: not a chat request but a POST of `control_body` to this control-plane path
  // (/v1/cache/reset, /v1/cache/prepare_modules, ...); its answer is kept in the record's
  // "control" list, not among the requests, and no table row counts it.
  std::string control;
  nlohmann::json control_body;
  int max_tokens = 1;
  int planned_tokens = 0;      // the prompt size the generator aimed at (sizes the context)
  int after = -1;              // a step that must have finished before this one is sent
  double after_delay_s = 0;    // and not before this many seconds after it finished (a tool's run)
  bool barrier = false;        // every earlier step must have finished before this one is sent
  bool restart_before = false; // stop and start the server again before sending this one
  // >= 0: not sent before this many seconds after the run's first step was handed out (an open-loop
  // arrival, e.g. a Poisson process at a request rate); a step that also waits for `after` goes
  // when both hold, as a user who reads the answer before asking again.
  double arrival_s = -1;
  // >= 0: not sent before `start_delay_s` seconds after that earlier step was sent (a request that
  // arrives while another runs, whatever came before both).
  int started = -1;
  double start_delay_s = 0;
  double x = 0;                // plot coordinate: prompt length, turn number, ...
};

struct Arm {
  std::string name;
  bool cold = false;           // a cold arm: its spread says how noisy the machine was
  bool pinned = false;         // a prefill probe: max_tokens 1, checked in every response
};

struct Workload {
  std::string name;            // "resend", "agent", ...
  std::string title;
  std::string description;     // a paragraph for the report
  int parallel = 1;            // server slots (--parallel / -np), the same on both servers
  int concurrency = 1;         // client requests in flight at most
  int ctx_size = 4096;         // the same total context on both servers (but see own_context)
  // Set by a workload about KV memory running out: ctx_size is its own, smaller than the context
  // every slot needs, and llama-server, which splits its context among its slots and cannot serve
  // a prompt longer than a slot, gets llama_ctx_size (what every slot needs) instead.
  bool own_context = false;
  int llama_ctx_size = 0;
  std::vector<Arm> arms;       // table rows, in order
  std::vector<Step> steps;
  int gate_step = -1;          // the request the correctness gates replay (-1: the last)
  std::string x_label;         // what Step::x means, for plots
  bool measure_sharing = false;  // record the prompts' shared-prefix token count and the cache stats
  bool throughput = false;     // the report shows prompt and generation tokens per second
  // Targets that have a disk tier (prefixd) run with one, in a fresh directory that outlives the
  // workload's restarts and goes at its end; before each step its write-behind is waited for, and
  // before a request after a restart its files leave the page cache (bench/disk_tier.h).
  bool disk_tier = false;
  bool compare_checks = false; // its checks (bench/checks.h) also run, and gate, in `prefixd-bench compare`
  // The report shows serving latency: TTFT p50/p99, inter-token latency p50/p99, output tokens/s
  // (bench/report_latency.h). Set by the public serving benchmarks and the concurrency sweep.
  bool latency = false;
  int clients = 0;             // > 0: a point of the concurrency sweep with this many clients

  const Arm* arm(const std::string& name) const;
  int gate_index() const { return gate_step >= 0 ? gate_step : static_cast<int>(steps.size()) - 1; }
};

// The preempt workload's arms, which its goals read.
inline constexpr const char* kPreemptHitFirst = "hit, first send";
inline constexpr const char* kPreemptHitDuring = "hit during the cold prefill";
inline constexpr const char* kPreemptColdWithHit = "cold, a hit arrives";
inline constexpr const char* kPreemptColdAlone = "cold alone";
inline constexpr const char* kPreemptHitAlone = "hit alone";

// The restart workload's arms, which its checks and report read.
inline constexpr const char* kRestartColdArm = "first send";
inline constexpr const char* kRestartWarmArm = "warm";
inline constexpr const char* kRestartArm = "after restart";
// The prepared workload's control steps (not table rows).
inline constexpr const char* kPreparedResetArm = "reset";
inline constexpr const char* kPreparedPrepareArm = "prepare";
// The toolloop workload's turns: "turn 1" … "turn kToolLoopTurns".
inline constexpr int kToolLoopTurns = 6;

// What a workload generator needs to know.
struct WorkloadParams {
  std::uint64_t seed = 1;
  double scale = 1.0;          // multiplies every token length (BENCH_SCALE)
  double words_per_token = 0.75;  // measured with the served model's tokenizer
  int reps = 5;                // repetitions of a probe arm, and of the agent and edit conversations
  int cold_reps_long = 3;      // repetitions of the cold arms of the two longest resend lengths
};

// Every workload, in the order `all` runs them.
const std::vector<std::string>& workload_names();
// What `prefixd-bench compare` runs by default (prefixd against llama-server) and what
// `prefixd-bench bench` runs by default (the workloads with checks of prefixd's own cache).
const std::vector<std::string>& compare_workload_names();
const std::vector<std::string>& bench_workload_names();
// The conversation traces `make bench` runs on models reused at checkpoints (hybrid, recurrent,
// sliding-window): docs/benchmarks-families.md.
const std::vector<std::string>& family_workload_names();
// The concurrency sweep's points: "sweep-1" … "sweep-32", one workload per client count.
const std::vector<int>& sweep_client_counts();
std::string sweep_workload_name(int clients);
// A comma list of names with "sweep" standing for every sweep point, in order.
std::vector<std::string> expand_workload_names(const std::vector<std::string>& names);
// Throws std::invalid_argument for an unknown name.
Workload make_workload(const std::string& name, const WorkloadParams& params);

// The generators (exposed for tests).
Workload make_resend(const WorkloadParams& params);
Workload make_agent(const WorkloadParams& params);
Workload make_multisession(const WorkloadParams& params);
Workload make_shared(const WorkloadParams& params);
Workload make_edit(const WorkloadParams& params);
Workload make_restart(const WorkloadParams& params);
Workload make_grow(const WorkloadParams& params);
Workload make_thrash(const WorkloadParams& params);
Workload make_burst(const WorkloadParams& params);
Workload make_unique(const WorkloadParams& params);
Workload make_chat(const WorkloadParams& params);
Workload make_prepared(const WorkloadParams& params);
Workload make_toolloop(const WorkloadParams& params);
Workload make_interleave(const WorkloadParams& params);
// The field's public serving benchmarks, scaled to this machine (bench/workload_public.cpp).
Workload make_gsp(const WorkloadParams& params);
Workload make_mqa(const WorkloadParams& params);
Workload make_multiturn(const WorkloadParams& params);
// 48 coding-agent sessions with the token shapes of public SWE-bench trajectories
// (bench/workload_codeagent.cpp).
Workload make_codeagent(const WorkloadParams& params);
// The first 187 requests of the Mooncake conversation trace, one at a time
// (bench/workload_mooncake.cpp).
Workload make_mooncake(const WorkloadParams& params);
// An editor's code completion: a cursor typing through files, /infill every few keystrokes with a
// rotating ring of other files' chunks, most requests dropped as the user types on
// (bench/workload_codecomplete.cpp).
Workload make_codecomplete(const WorkloadParams& params);
Workload make_sweep(const WorkloadParams& params, int clients);
// A cache hit arriving while a long cold prefill holds the memory it needs (bench/workload_preempt.cpp).
Workload make_preempt(const WorkloadParams& params);

// Arrival times of `n` requests of a Poisson process at `rate` per second, the first at 0:
// exponential gaps from the seeded generator (so every server sees the same schedule).
std::vector<double> poisson_arrivals(std::uint64_t seed, int n, double rate);

// The total context both servers get: every slot can hold the longest planned prompt plus its
// reply (llama-server splits -c among its slots; prefixd pools it), rounded up to 256, >= 4096.
int context_for_workload(const Workload& workload);

}  // namespace prefixd::bench
