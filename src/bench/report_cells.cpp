#include "bench/report_cells.h"

#include <format>
#include <map>

#include "bench/checks.h"
#include "bench/gates.h"

namespace prefixd::bench {

std::vector<std::string> server_names(const nlohmann::json& results) {
  std::vector<std::string> names;
  for (const auto& s : list_at(results, "servers")) names.push_back(s.value("name", "?"));
  return names;
}

std::string heading(const ReportStyle& style, int level, const std::string& text) {
  return std::string(static_cast<std::size_t>(style.heading_level + level - 1), '#') + " " + text + "\n\n";
}

const nlohmann::json& target_of(const nlohmann::json& workload, const std::string& name) {
  static const nlohmann::json kEmpty = nlohmann::json::object();  // immutable: "did not run"
  if (!workload.contains("targets") || !workload.at("targets").contains(name)) return kEmpty;
  return workload.at("targets").at(name);
}

// A token or a short reply as inline code that survives a Markdown table.
std::string code(const std::string& text) {
  std::string shown = nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  for (char c : shown) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '`') {
      out += '\'';
    } else {
      out += c;
    }
  }
  return "`" + out + "`";
}

std::string mib(const nlohmann::json& record) {
  const long kb = record.value("peak_rss_kb", -1L);
  return kb < 0 ? "n/a" : std::format("{:.0f} MiB", static_cast<double>(kb) / 1024.0);
}

std::string sum_cell(const ArmStats& s) {
  if (s.n == 0) return "n/a";
  return std::to_string(s.evaluated_sum) + (s.counts_missing ? "?" : "");
}

// A side with no requests (one server not run) has no ratio, not a ratio of zero.
std::string evaluated_ratio_cell(const ArmStats& a, const ArmStats& b) {
  if (a.n == 0 || b.n == 0) return "n/a";
  return count_ratio_cell(static_cast<double>(a.evaluated_sum), static_cast<double>(b.evaluated_sum));
}

std::string ttft_cell(const ArmStats& s) { return format_summary(s.ttft_ms); }

std::string prompt_cell(const ArmStats& a, const ArmStats& b) {
  const auto& s = a.n > 0 ? a.prompt_tokens : b.prompt_tokens;
  if (s.n == 0) return "n/a";
  if (s.min == s.max) return format_number(s.median);
  return std::format("{} ({}–{})", format_number(s.median), format_number(s.min), format_number(s.max));
}

std::string check(bool ok) { return ok ? "✓" : "✗"; }

namespace {

std::string diff_text(const nlohmann::json& value) {
  return value.is_number() ? std::format("{:.1e}", value.get<double>()) : "n/a";
}

}  // namespace

std::string gate_first_token(const nlohmann::json& g) {
  if (!g.contains("first_token")) return "not run";
  const auto& f = g.at("first_token");
  std::string out = !f.value("equal", false) ? "✗ warm " + code(f.value("warm", "")) + ", cold " + code(f.value("cold", ""))
                    : f.value("tie", false) ? "✓ a tie: warm " + code(f.value("warm", "")) + ", cold " + code(f.value("cold", ""))
                                            : "✓ " + code(f.value("warm", ""));
  out += std::format("; top-{} logprob max Δ {}", 5, g.value("logprobs", false) ? diff_text(f.at("logprob_max_abs_diff")) : "n/a (no logprobs)");
  out += std::format("; evaluated warm {} / cold {}", f.value("warm_evaluated", -1), f.value("cold_evaluated", -1));
  return out;
}

std::string gate_context(const nlohmann::json& g) {
  if (!g.contains("context")) return "not run";
  const auto& c = g.at("context");
  std::string how;
  if (c.value("first_token_differs", false)) how = "first token differs";
  if (g.value("logprobs", false)) {
    const auto& diff = c.at("logprob_max_abs_diff");
    how += (how.empty() ? "" : ", ") + (diff.is_number() ? "top-5 logprob max Δ " + diff_text(diff) : std::string("top-5 tokens disjoint"));
  }
  if (how.empty() && c.value("text_differs", false)) how = "reply differs";
  return check(c.value("differs", false)) + (how.empty() ? "" : " (" + how + ")");
}

// Steps whose prompt size the two servers reported differently (their templates or tokenizers
// disagree, so the comparison would not be like for like).
std::string prompt_agreement(const nlohmann::json& w, const std::string& first, const std::string& second) {
  const auto& a = target_of(w, first);
  const auto& b = target_of(w, second);
  if (!a.contains("requests") || !b.contains("requests")) return "n/a";
  std::map<int, std::int64_t> left;
  for (const auto& r : a.at("requests")) left[r.value("step", -1)] = r.value("prompt_tokens", -1L);
  int compared = 0;
  int differ = 0;
  for (const auto& r : b.at("requests")) {
    const auto it = left.find(r.value("step", -1));
    if (it == left.end() || it->second < 0 || r.value("prompt_tokens", -1L) < 0) continue;
    ++compared;
    if (it->second != r.value("prompt_tokens", -1L)) ++differ;
  }
  if (compared == 0) return "n/a";
  return differ == 0 ? std::format("✓ {} of {}", compared, compared) : std::format("✗ {} of {} differ", differ, compared);
}

std::string pinned_check(const nlohmann::json& w, const nlohmann::json& record) {
  int n = 0;
  int bad = 0;
  for (const auto& arm : list_at(w, "arms")) {
    if (!arm.value("pinned", false)) continue;
    const ArmStats s = arm_stats(record, arm.value("name", ""));
    n += s.n;
    bad += s.not_one_token;
  }
  if (n == 0) return "—";
  return bad == 0 ? std::format("✓ {} of {}", n, n) : std::format("✗ {} of {} not 1 token", bad, n);
}

std::string gates_cell(const nlohmann::json& record) {
  if (record.contains("error")) return "✗ run failed";
  std::string out = !record.contains("gates") ? "not run" : gates_passed(record.at("gates")) ? "✓" : "✗";
  if (record.contains("checks")) out += checks_passed(record.at("checks")) ? "; checks ✓" : "; checks ✗";
  return out;
}


void TargetTable::group(const std::string& label, const std::string& ratio_label) {
  for (const auto& n : names_) headers_.push_back(label.empty() ? n : label + " " + n);
  const bool ratio = names_.size() >= 2 && !ratio_label.empty();
  if (ratio) headers_.push_back(ratio_label);
  has_ratio_.push_back(ratio);
}

void TargetTable::begin_row(std::vector<std::string> leading) { rows_.push_back(std::move(leading)); }

void TargetTable::cells(const std::vector<std::string>& per_target, const std::string& ratio) {
  auto& row = rows_.back();
  for (std::size_t i = 0; i < names_.size(); ++i) row.push_back(i < per_target.size() ? per_target[i] : "n/a");
  if (names_.size() >= 2 && !ratio.empty()) row.push_back(ratio);
}

std::string TargetTable::render() {
  Table table(headers_);
  for (auto& row : rows_) table.add_row(std::move(row));
  rows_.clear();
  return table.render();
}

}  // namespace prefixd::bench
