// prefixd bench — `prefixd-bench route-bench`: the multi-session chat trace (workload
// `multisession`) through `prefixd route` in front of several prefixd backends: the prefix policy
// following the backends' KV events, the prefix policy polling their summaries, and round-robin, in
// one run, repetitions interleaved A B C C B A so that drift in the machine's speed falls on all.
// Reports the prompt tokens all backends evaluated, the hit ratio and TTFT.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

struct RouteBenchOptions {
  std::string model_path;
  std::string prefixd_bin;        // empty: the prefixd beside this program
  int backends = 3;
  int threads = 1;                // each backend's --threads
  int pairs = 1;                  // A B B A = 2 pairs; each pair runs both policies once
  std::uint64_t seed = 1;
  double scale = 1.0;
  double load_weight = 64;
  std::string backend_args;       // more `prefixd serve` arguments for every backend
  bool kv_events = true;          // backends publish KV events; the events router runs too
  // > 0: after the pairs, one more run of the prefix policy in which backend 0 is killed (SIGKILL)
  // once this many of its requests have finished; the run fails if any request does.
  int kill_after = 0;
  std::string out_path;           // non-empty: the results as JSON
  std::string log_dir = "/tmp";   // the servers' and routers' logs
  std::chrono::seconds startup_limit{600};
  std::chrono::seconds request_timeout{1800};
};

// Returns the results (also written to out_path); throws std::runtime_error when a server does not
// start or a request fails.
nlohmann::json run_route_bench(const RouteBenchOptions& options, std::ostream& progress);

}  // namespace prefixd::bench
