// prefixd compare — runs one workload on one server: starts it, sends the steps (in order, with
// the workload's concurrency and per-session ordering), samples its memory, runs the gates.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "compare/target.h"
#include "compare/workload.h"

namespace prefixd::compare {

struct RunConfig {
  ServerSettings base;  // model, threads, cache budget; context and slots come from the workload
  std::string log_path;
  std::chrono::seconds startup_limit{600};
  std::chrono::seconds request_timeout{3600};
  bool gates = true;
};

// The record of this target on this workload (the results file's "targets" entry):
// command, requests, rss series, peak RSS, counters, gates, seconds; "error" when it could not
// finish (what ran until then is kept).
nlohmann::json run_workload(const Target& target, const Workload& workload, const RunConfig& config,
                            std::ostream& progress);

// Starts `target` once and asks its tokenizer how many words of generated text make a token.
double measure_words_per_token(const Target& target, const RunConfig& config, std::ostream& progress);

}  // namespace prefixd::compare
