// prefixd bench — numbers the report derives from a results file: per-arm summaries, the
// point-or-range rule for ratios, hit ratios. Pure functions of the JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/stats.h"

namespace prefixd::bench {

// The member `key` of `j`, or an empty array when there is none: for iterating a results file
// without copying it.
const nlohmann::json& list_at(const nlohmann::json& j, const char* key);

// A cold arm is tight when every repetition is within ×1.5 of its fastest one.
constexpr double kTightSpread = 1.5;
bool is_tight(const Summary& s);
// max ÷ min of an arm's samples (1 for fewer than two).
double spread(const Summary& s);

// numerator ÷ denominator of two medians. When `noise` (the cold arms' spread, see
// workload_noise) is at most kTightSpread the ratio is a point, "0.52×"; otherwise it is the band
// that noise allows around it, "0.26–1.04×" (÷ and × noise); "n/a" when either side is missing.
std::string ratio_cell(const Summary& numerator, const Summary& denominator, double noise);
// a ÷ b of two counts, "0.25×"; "n/a" when b is not positive or a is negative.
std::string count_ratio_cell(double a, double b);
// cached ÷ prompt as "87%"; "n/a" without prompt tokens.
std::string percent_cell(std::int64_t part, std::int64_t whole);

// What one server did on one arm (or on every request when `arm` is empty).
struct ArmStats {
  int n = 0;                      // requests that answered
  int errors = 0;
  Summary ttft_ms;
  Summary prompt_tokens;
  std::int64_t prompt_sum = 0;
  std::int64_t evaluated_sum = 0;
  std::int64_t cached_sum = 0;
  bool counts_missing = false;    // some request did not report its counters
  int not_one_token = 0;          // requests whose completion_tokens != 1 (pinned arms)
  double ttft_sum_ms = 0;         // Σ TTFT: the time users waited for a first token in all
  // Server-side prefill: Σ timings.prompt_ms over the requests that evaluated something, and Σ of
  // their evaluated tokens; their quotient is what one evaluated prompt token cost.
  double prefill_ms_sum = 0;
  std::int64_t prefill_tokens = 0;
};
// `rep` >= 0 takes only the requests of that interleaved repetition.
ArmStats arm_stats(const nlohmann::json& target_record, const std::string& arm, int rep = -1);

// "0.52 ms" per evaluated token; "n/a" when nothing was evaluated with a reported prompt_ms.
std::string prefill_cell(const ArmStats& s);
// "1234 ms"; "n/a" without answered requests.
std::string ttft_sum_cell(const ArmStats& s);

// The repetitions a workload ran (1 unless interleaved).
int repetitions(const nlohmann::json& workload);

// Per interleaved repetition, median TTFT of target `a` ÷ that of `b` over every request;
// repetitions where either side has no answer are left out.
std::vector<double> per_rep_ttft_ratios(const nlohmann::json& workload, const std::string& a, const std::string& b);

// Tokens per second over one repetition's wall time (first request sent → last answer complete).
struct Throughput {
  double seconds = 0;
  double generated_per_s = 0;  // Σ completion tokens ÷ wall time
  double prompt_per_s = 0;     // Σ prompt tokens ÷ wall time (cached or evaluated alike)
};
std::optional<Throughput> throughput(const nlohmann::json& target_record, int rep);
// Per repetition, generation tokens per second of `a` ÷ those of `b`.
std::vector<double> per_rep_throughput_ratios(const nlohmann::json& workload, const std::string& a, const std::string& b);

// "0.98× (0.91–1.05× over 4 repetitions)"; "n/a" for none.
std::string spread_cell(const std::vector<double>& ratios);

// How noisy the machine was for this workload: the worst max ÷ min of its cold arms (on every
// server, arms with at least two repetitions). A workload without a repeated cold arm borrows the
// worst of every cold arm in the run (the machine's noise does not depend on the workload); 1
// when the run has none.
double workload_noise(const nlohmann::json& results, const nlohmann::json& workload);

}  // namespace prefixd::bench
