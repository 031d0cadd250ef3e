// prefixd bench — the Markdown report of a results file: a summary, then one table per workload
// with every target side by side (the first compared with the second), the correctness gates,
// interleaved repetitions, throughput, checks, and the plots.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

struct ReportStyle {
  std::string image_prefix;  // prepended to plot file names: the plots' folder seen from the report
  int heading_level = 1;     // 1: the report's title is "#"; 2 when embedded under a heading
};

std::string render_report(const nlohmann::json& results, const ReportStyle& style);

// The rows of the summary table, for the docs and the console.
std::string render_summary(const nlohmann::json& results);
// Per workload run more than once: the spread of the per-repetition ratios; empty when none was.
std::string render_interleaved(const nlohmann::json& results);
// One workload's section.
std::string workload_section(const nlohmann::json& results, const nlohmann::json& workload, const ReportStyle& style);

// The issue's done-when line, per workload it names (multisession, shared, edit): does prefixd
// evaluate fewer prompt tokens, and answer with a lower median TTFT, than llama-server?
std::string render_targets(const nlohmann::json& results);

// The page with everything between its report markers replaced by `report` (the hand-written rest
// stays); a page without markers gets them, with the report, appended. A named `section` has
// markers of its own, so several runs (one per model) can share a page without overwriting
// each other or the unnamed report. A begin marker is found by its name alone, whatever the
// parenthesis after it says (pages written when the command was `prefixd compare` still match).
inline constexpr const char* kReportBegin = "<!-- compare-report:begin (written by prefixd-bench compare --docs) -->";
inline constexpr const char* kReportEnd = "<!-- compare-report:end -->";
std::string report_begin_marker(const std::string& section);
std::string report_end_marker(const std::string& section);
std::string splice_report(const std::string& page, const std::string& report, const std::string& section = "");

}  // namespace prefixd::bench
