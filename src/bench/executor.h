// prefixd bench — runs one workload on one target: starts it, sends the steps (in order, with
// the workload's concurrency and per-session ordering), samples its memory, runs the gates.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/target.h"
#include "bench/workload.h"

namespace prefixd::bench {

struct RunConfig {
  ServerSettings base;  // model, threads, cache budget; context and slots come from the workload
  std::string log_path;
  std::chrono::seconds startup_limit{600};
  std::chrono::seconds request_timeout{3600};
  bool gates = true;
  std::string disk_parent;  // where a workload's disk-tier directories go; empty: TMPDIR, else /tmp
};

// The record of this target on this workload (the results file's "targets" entry):
// command, requests, rss series, peak RSS, counters, gates, seconds; "error" when it could not
// finish (what ran until then is kept).
nlohmann::json run_workload(const Target& target, const Workload& workload, const RunConfig& config,
                            std::ostream& progress);

// Adds one more run of a target on a workload (repetition `rep` of an interleaved run) to the
// record of its earlier runs: requests are tagged with their "rep" and appended, the RSS series
// continues after the earlier runs' time, peaks take the maximum, counters, restarts and seconds
// add up; gates are kept from the first run that has them. `into` null: `record` becomes it.
void merge_repetition(nlohmann::json& into, nlohmann::json record, int rep);

// Starts `target` once and asks its tokenizer how many words of generated text make a token.
double measure_words_per_token(const Target& target, const RunConfig& config, std::ostream& progress);

}  // namespace prefixd::bench
