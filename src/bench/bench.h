// prefixd bench — `prefixd bench`: starts a prefixd server, drives it over HTTP with one of a few
// prompt-cache scenarios, prints Markdown tables with PASS/FAIL lines and writes JSON.
//
// This component talks to the server over HTTP only; it knows nothing of the engine, scheduler or
// cache code, so it measures exactly what a client would see.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace prefixd::bench {

struct BenchOptions {
  std::string scenario = "all";    // one of scenario_names(), or "all"
  std::string model_path;
  std::optional<int> tokens;       // the main prompt size; each scenario has its own default
  std::optional<int> reps;         // warm repetitions of `resend` (default 5)
  int cold_reps = 3;               // cold repetitions of `resend`
  int sessions = 8;                // sessions of `shared`, requests of `burst`
  std::string json_path;           // empty: no JSON file
  std::string server_bin;          // empty: this executable
  int port = 0;                    // 0: a free port for each server
  std::optional<int> threads;
  std::optional<int> ctx_size;     // default: sized per scenario
  std::string extra_args;          // appended to every `serve` command line
  std::string server_log;          // empty: a temporary file, removed after a successful run
  std::chrono::seconds startup_timeout{600};
  std::chrono::seconds request_timeout{3600};
};

// The scenarios in the order `all` runs them.
const std::vector<std::string>& scenario_names();

// Runs the chosen scenario(s). Tables and PASS/FAIL lines go to `out`, progress to `progress`.
// Returns 0 when every scenario ran (whatever its verdicts), 1 when one could not run.
int run_bench(const BenchOptions& options, std::ostream& out, std::ostream& progress);

}  // namespace prefixd::bench
