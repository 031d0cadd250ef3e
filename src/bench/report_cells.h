// prefixd bench — the cells and small blocks the report is made of, shared by the summary and the
// per-workload sections.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/report.h"
#include "bench/report_stats.h"
#include "bench/table.h"

namespace prefixd::bench {

// The names of the servers a results file ran, in --targets order; the first is compared with
// the second in every "÷" column.
std::vector<std::string> server_names(const nlohmann::json& results);
std::string heading(const ReportStyle& style, int level, const std::string& text);
// A target's record in a workload entry; an empty object when it did not run there.
const nlohmann::json& target_of(const nlohmann::json& workload, const std::string& name);
// A token or a short reply as inline code that survives a Markdown table.
std::string code(const std::string& text);
std::string mib(const nlohmann::json& record);
std::string sum_cell(const ArmStats& s);
std::string evaluated_ratio_cell(const ArmStats& a, const ArmStats& b);
std::string ttft_cell(const ArmStats& s);
std::string prompt_cell(const ArmStats& a, const ArmStats& b);
std::string check(bool ok);
std::string gate_first_token(const nlohmann::json& gates);
std::string gate_context(const nlohmann::json& gates);
// Steps whose prompt size two servers reported differently.
std::string prompt_agreement(const nlohmann::json& workload, const std::string& first, const std::string& second);
std::string pinned_check(const nlohmann::json& workload, const nlohmann::json& record);
std::string gates_cell(const nlohmann::json& record);

// A table with a column group per metric: one column per target, then the first ÷ second ratio
// when there are two or more targets.
class TargetTable {
 public:
  TargetTable(std::vector<std::string> names, std::vector<std::string> leading_headers)
      : names_(std::move(names)), headers_(std::move(leading_headers)) {}
  // `label` + " " + target name per target; `ratio_label` (if not empty) after them.
  void group(const std::string& label, const std::string& ratio_label = "");
  // Starts a row with the leading cells; then one `cells` call per group, in order.
  void begin_row(std::vector<std::string> leading);
  void cells(const std::vector<std::string>& per_target, const std::string& ratio = "");
  std::string render();

 private:
  std::vector<std::string> names_;
  std::vector<std::string> headers_;
  std::vector<bool> has_ratio_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace prefixd::bench
