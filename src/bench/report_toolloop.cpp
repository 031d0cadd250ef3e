#include "bench/report_toolloop.h"

#include <format>
#include <optional>

#include "bench/report_cells.h"
#include "bench/report_stats.h"
#include "bench/stats.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

// The values of `field` over one target's requests of `arm` (of repetition `rep`; -1: all).
std::vector<double> values_of(const nlohmann::json& record, const std::string& arm, const char* field, int rep) {
  std::vector<double> out;
  for (const auto& r : list_at(record, "requests")) {
    if (r.value("arm", "") != arm || r.contains("error") || (rep >= 0 && r.value("rep", 0) != rep)) continue;
    const auto it = r.find(field);
    if (it != r.end() && it->is_number() && it->get<double>() >= 0) out.push_back(it->get<double>());
  }
  return out;
}

std::optional<double> median_of(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  return summarize(values).median;
}

std::string median_cell(const std::vector<double>& values) {
  const auto m = median_of(values);
  return m ? format_number(*m) : "n/a";
}

// Per repetition: median of `a` ÷ median of `b` on this arm.
std::vector<double> per_rep_ratios(const nlohmann::json& w, const std::string& a, const std::string& b,
                                   const std::string& arm, const char* field) {
  std::vector<double> ratios;
  for (int rep = 0; rep < repetitions(w); ++rep) {
    const auto x = median_of(values_of(target_of(w, a), arm, field, rep));
    const auto y = median_of(values_of(target_of(w, b), arm, field, rep));
    if (x && y && *y > 0) ratios.push_back(*x / *y);
  }
  return ratios;
}

}  // namespace

std::string toolloop_block(const nlohmann::json& w, const std::vector<std::string>& names) {
  if (w.value("name", "") != "toolloop" || names.empty()) return "";
  const bool pair = names.size() >= 2;
  TargetTable table(names, {"turn"});
  table.group("fed", pair ? "fed ÷" : "");
  table.group("TTFT ms", pair ? "TTFT ÷" : "");
  table.group("prefill ms", pair ? "prefill ÷" : "");
  for (const auto& arm : list_at(w, "arms")) {
    const std::string name = arm.value("name", "");
    table.begin_row({name});
    for (const auto& [field, label] : {std::pair{"evaluated", "fed"}, {"ttft_ms", "TTFT"}, {"server_prompt_ms", "prefill"}}) {
      std::vector<std::string> cells;
      for (const auto& n : names) cells.push_back(median_cell(values_of(target_of(w, n), name, field, -1)));
      table.cells(cells, pair ? spread_cell(per_rep_ratios(w, names[0], names[1], name, field)) : "");
    }
  }
  std::string out = table.render() + "\n";
  out += "Per turn, medians per request: fed = prompt tokens the server ran through the model (timings.prompt_n), TTFT "
         "measured by the client up to the first streamed piece (for a tool call, its opening delta, sent once the "
         "call's name is known), prefill = timings.prompt_ms, server side.";
  if (pair) out += std::format(" Ratios {} ÷ {}: median of the per-repetition medians (min–max).", names[0], names[1]);
  return out + "\n\n";
}

}  // namespace prefixd::bench
