// prefixd bench — the benchmark component: declarative workloads (bench/workload.h) driven over
// HTTP against targets (prefixd, llama-server, prefixd with other serve flags; bench/target.h) by
// one executor, with correctness gates, per-workload checks of prefixd's cache, a results file, a
// Markdown report and plots. Four commands use it:
// - `prefixd-bench compare`: several targets side by side (make bench), report and plots on disk;
// - `prefixd-bench bench`: prefixd alone with the checks, report and PASS/FAIL lines on stdout;
// - `prefixd-bench soak`: many clients against one prefixd for a long time, its memory against its
//   budgets (bench/soak.h);
// - `prefixd-bench audit`: two API keys against a running server, whether one can tell which
//   prompts the other sent (bench/audit.h).
//
// It talks to servers over HTTP only and knows nothing of the engine, scheduler or cache code, so
// it measures exactly what a client would see; a disk tier's files it handles as plain files
// (their page cache, their size), never by their format (bench/disk_tier.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "bench/target.h"

namespace prefixd::bench {

struct RunOptions {
  std::string model_path;
  std::vector<std::string> workloads;   // empty: the command's default list
  std::vector<std::string> targets = {"prefixd", "llama-server"};
  double scale = 1.0;                   // BENCH_SCALE
  std::uint64_t seed = 20240601;
  int reps = 5;
  int cold_reps_long = 3;
  int interleave = 1;                   // runs of each workload, target order alternating A B B A …
  int threads = 0;                      // 0: every CPU of the machine
  int cache_mib = 8192;                 // llama-server's default --cache-ram
  int snapshot_mib = 0;                 // > 0: prefixd's checkpoints get this much of cache_mib (ServerSettings)
  bool token_gate = false;              // prefixd must evaluate fewer prompt tokens than llama-server (warm-up included)
  TargetSources sources;
  std::string out_dir = "bench/results";
  std::string name;                     // file stem; empty: <date>-<hostname>
  std::string docs_path;                // non-empty: write the report into this Markdown page too
  std::string docs_section;             // non-empty: between this section's own markers of that page
  std::string render_path;              // non-empty: only re-render report/plots/docs from this results file
  std::string json_path;                // `prefixd-bench bench`: write the results file here (empty: nowhere)
  std::string server_log;               // empty: a temporary file, kept when something failed
  std::string disk_dir;                 // where disk-tier directories go (a workload's disk_tier); empty: TMPDIR or /tmp
  bool gates = true;
  bool plots = true;
  std::chrono::seconds startup_timeout{600};
  std::chrono::seconds request_timeout{3600};
};

// Runs the workloads on every target and writes <out>/<stem>.json, .md, the plots and the docs
// page. Returns 0 when every server finished every workload and every gate passed, 1 otherwise.
int run_compare(const RunOptions& options, std::ostream& out, std::ostream& progress);

// Runs the workloads on prefixd alone (options.targets is ignored) with the per-workload checks;
// prints the report and one PASS/FAIL/SKIP line per check. Returns 0 when everything ran and no
// gate or check failed, 1 otherwise.
int run_bench(const RunOptions& options, std::ostream& out, std::ostream& progress);

}  // namespace prefixd::bench
