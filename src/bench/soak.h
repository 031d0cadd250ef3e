// prefixd bench — the soak test (`prefixd-bench soak`, make soak): many concurrent clients against
// one real `prefixd serve` for a long time, the server's resident memory sampled every second and
// held against what its configuration allows.
//
// Each client runs its own deterministic traffic (soak_traffic.cpp): multi-turn chat sessions that
// send their replies back and share system prompts with other sessions, streamed and whole
// answers, streams the client hangs up on mid-reply, text completions, and requests the server
// must refuse with a 4xx. The cache is reset every few minutes. At the end: requests by outcome,
// RSS min/max/final against the limit (host cache budget + KV context + model file + a stated
// margin), a PNG plot and a results file. The run fails when RSS passed the limit, when any request
// ended in an unexpected way, or when the server died or kept a request running after the clients
// were gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/rss.h"

namespace prefixd::bench {

struct SoakOptions {
  std::string model_path;
  std::chrono::seconds duration{1800};
  int clients = 16;
  std::uint64_t seed = 1;
  // The server: slots, context and threads, and its host memory for cached prompts.
  int parallel = 4;
  int ctx_size = 8192;
  int threads = 0;  // 0: every CPU
  int cache_mib = 256;     // --prompt-cache-capacity-bytes + --prompt-cache-snapshot-capacity-bytes
  int snapshot_mib = 64;   // of cache_mib, for checkpoints
  // What RSS may exceed the budgets, the KV context and the model file by: the runtime's own
  // buffers and heap. On the default model (qwen2-0.5b shapes, 504 MiB file) they are about 700 MiB:
  // a 324 MiB compute buffer and a 12 MiB output buffer at --batch-size 512 with its 151,936-token
  // vocabulary, 193 MiB more for the weights where the CPU repacks them (AMX: 559 MiB copied
  // instead of mapped), and the vocabulary, threads and allocator.
  int margin_mib = 1024;
  std::chrono::seconds reset_every{120};  // POST /v1/cache/reset; 0: never
  std::string prefixd_bin;   // empty: the prefixd beside this program
  std::string prefixd_args;  // more `prefixd serve` arguments
  std::string out_dir = "bench/out/soak";
  std::string server_log;    // empty: <out_dir>/server.log
  std::chrono::seconds startup_timeout{600};
  std::chrono::seconds request_timeout{600};
};

// How a request ended.
enum class SoakOutcome {
  completed,   // a 200 with a whole answer (stream ended with [DONE])
  cancelled,   // the client hung up mid-stream on purpose
  rejected,    // a deliberately bad request answered with the 4xx and error body it deserves
  unexpected,  // anything else: transport error, 5xx, a valid request refused, a bad one accepted
};
inline constexpr int kSoakOutcomes = 4;
const char* soak_outcome_name(SoakOutcome outcome);

// The kinds of request the traffic mixes.
enum class SoakKind { chat, chat_stream, chat_cancel, completion, invalid, reset, constrained };
inline constexpr int kSoakKinds = 7;
const char* soak_kind_name(SoakKind kind);

// One finished request.
struct SoakEvent {
  double end_s = 0;  // seconds since the run started
  SoakKind kind = SoakKind::chat;
  SoakOutcome outcome = SoakOutcome::completed;
  std::string detail;  // why, for an unexpected one
};

// The memory limit and what it is made of, in bytes.
struct SoakBudget {
  std::uint64_t cache_bytes = 0;       // host tier + checkpoints (the configured budgets)
  std::uint64_t kv_context_bytes = 0;  // ctx_size x K/V bytes per token (the device tier lives there)
  std::uint64_t model_bytes = 0;       // the GGUF file, mapped
  std::uint64_t margin_bytes = 0;
  std::uint64_t limit() const { return cache_bytes + kv_context_bytes + model_bytes + margin_bytes; }
};

// Everything a run measured; what the summary, the checks and the plot are made of.
struct SoakRun {
  double seconds = 0;       // from the server's start to the clients' end
  std::vector<SoakEvent> events;
  RssSeries rss;            // (seconds, kB) every second
  long hwm_kb = -1;         // VmHWM at the end: the peak, between samples too
  SoakBudget budget;
  bool server_alive = true; // still running when the clients were done
  bool idle_after = true;   // no request left running once the clients were gone
  nlohmann::json cache_stats;  // GET /v1/cache/stats at the end
};

// The verdict: empty when the run passed, else one line per failed check.
std::vector<std::string> soak_failures(const SoakRun& run);
// The summary (text), the results file and the plot.
std::string soak_summary(const SoakRun& run, const SoakOptions& options);
nlohmann::json soak_results(const SoakRun& run, const SoakOptions& options);
// gnuplot data and script for <stem>.png: RSS against the limit, requests by outcome over time.
struct SoakPlot {
  std::string rss_data;
  std::string requests_data;
  std::string script;
};
SoakPlot soak_plot(const SoakRun& run, const std::string& data_dir, const std::string& png_path);

// Starts the server, runs the clients for options.duration, writes <out_dir>/soak.json, soak.md,
// soak.png and prints the summary. Returns 0 when every check passed, 1 otherwise.
int run_soak(const SoakOptions& options, std::ostream& out, std::ostream& progress);

}  // namespace prefixd::bench
