// prefixd bench — every prompt token each server ran through the model on a workload, prefixd's
// warm-up after replies included, and the token gate of the family runs (--token-gate): prefixd
// must evaluate fewer prompt tokens than llama-server on every workload. Pure functions of a
// results file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/report.h"

namespace prefixd::bench {

struct TokenCount {
  int answered = 0;          // requests that answered
  int failed = 0;            // requests that did not, and 1 more when the run itself failed
  bool counts_missing = false;
  std::int64_t fed = 0;      // Σ the requests' own counts (timings.prompt_n)
  std::int64_t warmup = 0;   // fed after replies for the next turn (prefixd_warmup_tokens_total)
  bool warmup_reported = false;
  std::int64_t total() const { return fed + warmup; }
};
TokenCount token_count(const nlohmann::json& target_record);

// "prefixd" or "llama-server": from the results file's server list, else from the name.
std::string server_kind(const nlohmann::json& results, const std::string& name);

// One prefixd target against llama-server on one workload.
struct TokenVerdict {
  std::string workload;
  std::string target;
  TokenCount prefixd;
  TokenCount llama;
  bool pass = false;   // no more prompt tokens than llama-server, and both sides usable
  bool gated = true;   // prefixd as a user runs it; false for a --variant, shown beside it only
  std::string why;  // why it failed when not on the counts: a failed run, failed requests, ...
};
// Every prefixd target against the llama-server target, per workload; none without a
// llama-server target.
std::vector<TokenVerdict> token_verdicts(const nlohmann::json& results);
// True unless the run asked for the gate (options.token_gate) and some gated verdict failed (or
// there was none to judge).
bool token_gate_passed(const nlohmann::json& results);

// One request that target `a` evaluated more prompt tokens for than target `b`.
struct RequestExcess {
  int step = 0;
  int rep = 0;
  std::string arm;
  std::int64_t prompt = 0;
  std::int64_t a = 0;
  std::int64_t b = 0;
};
std::vector<RequestExcess> requests_evaluating_more(const nlohmann::json& workload, const std::string& a,
                                                    const std::string& b);

// The report's section: tokens with warm-up per workload and target, the gate's verdicts when it
// was asked for, the checkpoints both servers kept, and the requests where prefixd evaluated more.
// Empty when no server reported warm-up or checkpoints.
std::string render_token_section(const nlohmann::json& results, const ReportStyle& style);

}  // namespace prefixd::bench
