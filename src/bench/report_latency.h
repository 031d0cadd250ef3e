// prefixd bench — serving latency of a results file: TTFT and inter-token latency percentiles and
// output tokens per second per repetition, the table of a latency workload (the public serving
// benchmarks), and the concurrency sweep across its points. Pure functions of the JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/report.h"

namespace prefixd::bench {

// Nearest-rank percentile (q in (0, 1]) of the samples; nullopt for none.
std::optional<double> percentile(std::vector<double> samples, double q);

// One target's serving latency over one repetition of a workload.
struct Latency {
  int requests = 0;        // answered
  int errors = 0;
  double ttft_p50_ms = 0;
  double ttft_p99_ms = 0;
  std::optional<double> itl_p50_ms;  // over every gap between streamed tokens of every request
  std::optional<double> itl_p99_ms;
  double output_per_s = 0;    // Σ completion tokens ÷ (first request sent → last answer complete)
  double requests_per_s = 0;
};
std::optional<Latency> latency_of(const nlohmann::json& target_record, int rep);

// Per repetition, a measure of target `a` ÷ the same of `b`.
std::vector<double> per_rep_latency_ratios(const nlohmann::json& workload, const std::string& a, const std::string& b,
                                           double Latency::*measure);

// The concurrency sweep's workloads of a results file (those with "clients"), fewest clients first.
std::vector<const nlohmann::json*> sweep_points(const nlohmann::json& results);

// The section's table for a workload with "latency": one row per target.
std::string latency_block(const nlohmann::json& workload, const std::vector<std::string>& names);

// The concurrency sweep: every "sweep-N" workload of the results as one table (rows by clients,
// every target side by side) with the acceptance verdicts; empty when the results have none.
std::string sweep_section(const nlohmann::json& results, const ReportStyle& style);

}  // namespace prefixd::bench
