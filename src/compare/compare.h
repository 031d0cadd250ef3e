// prefixd compare — `prefixd compare`: prefixd and llama-server side by side on the same model,
// machine and workloads, one server at a time, with equal context, slots, threads and host cache
// budget; writes results JSON, a Markdown report, PNG plots and (optionally) docs/benchmarks.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace prefixd::compare {

struct CompareOptions {
  std::string model_path;
  std::vector<std::string> workloads;   // empty: all, in workload_names() order
  std::vector<std::string> targets = {"prefixd", "llama-server"};
  double scale = 1.0;                   // BENCH_SCALE
  std::uint64_t seed = 20240601;
  int reps = 5;
  int cold_reps_long = 3;
  int threads = 0;                      // 0: every CPU of the machine
  int cache_mib = 8192;                 // llama-server's default --cache-ram
  std::string out_dir = "bench/results";
  std::string name;                     // file stem; empty: <date>-<hostname>
  std::string prefixd_bin;              // empty: this executable
  std::string llama_server_bin = "llama-server";
  std::string prefixd_args;             // appended to `prefixd serve`
  std::string llama_args;               // appended to llama-server's arguments
  std::string docs_path;                // non-empty: write the report into this Markdown page too
  std::string render_path;              // non-empty: only re-render report/plots/docs from this results file
  std::string server_log;               // empty: a temporary file, kept when something failed
  bool gates = true;
  bool plots = true;
  std::chrono::seconds startup_timeout{600};
  std::chrono::seconds request_timeout{3600};
};

// Returns 0 when every server finished every workload and every gate passed, 1 otherwise.
int run_compare(const CompareOptions& options, std::ostream& out, std::ostream& progress);

}  // namespace prefixd::compare
