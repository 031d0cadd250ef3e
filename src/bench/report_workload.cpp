// One workload's section of the report: its arms side by side on every target, the facts and
// gates, interleaved repetitions, throughput, checks and plots.
#include <format>

#include "bench/checks.h"
#include "bench/report.h"
#include "bench/report_cells.h"
#include "bench/report_disk.h"
#include "bench/report_latency.h"
#include "bench/report_toolloop.h"

namespace prefixd::bench {
namespace {

std::string run_order(const nlohmann::json& w) {
  std::string s;
  for (const auto& name : list_at(w, "order")) s += (s.empty() ? "" : ", then ") + name.get<std::string>();
  return s.empty() ? std::string("n/a") : s;
}

std::string arm_table(const nlohmann::json& w, const std::vector<std::string>& names, double noise) {
  TargetTable table(names, {"arm", "n", "prompt tokens"});
  table.group("TTFT ms", "TTFT ÷");
  table.group("evaluated", "evaluated ÷");
  table.group("hit");
  table.group("prefill ms/token");
  auto row = [&](const std::string& label, const std::string& arm) {
    std::vector<ArmStats> s;
    for (const auto& n : names) s.push_back(arm_stats(target_of(w, n), arm));
    const ArmStats& a = s.front();
    const ArmStats& b = s.size() > 1 ? s[1] : s.front();
    int n = 0;
    for (const auto& x : s) n = std::max(n, x.n);
    table.begin_row({label, std::to_string(n), prompt_cell(a, b)});
    std::vector<std::string> ttft, evaluated, hit, prefill;
    for (const auto& x : s) {
      ttft.push_back(ttft_cell(x));
      evaluated.push_back(sum_cell(x));
      hit.push_back(percent_cell(x.cached_sum, x.prompt_sum));
      prefill.push_back(prefill_cell(x));
    }
    table.cells(ttft, ratio_cell(a.ttft_ms, b.ttft_ms, noise));
    table.cells(evaluated, evaluated_ratio_cell(a, b));
    table.cells(hit);
    table.cells(prefill);
  };
  for (const auto& arm : list_at(w, "arms")) {
    const std::string name = arm.value("name", "");
    row(arm.value("cold", false) && !name.starts_with("cold") ? name + " (cold)" : name, name);
  }
  row("**all requests**", "");
  return table.render();
}

std::string facts_table(const nlohmann::json& w, const std::vector<std::string>& names) {
  std::vector<std::string> headers{""};
  headers.insert(headers.end(), names.begin(), names.end());
  Table facts(headers);
  auto add = [&](const std::string& label, auto cell) {
    std::vector<std::string> row{label};
    for (const auto& n : names) row.push_back(cell(target_of(w, n)));
    facts.add_row(std::move(row));
  };
  add("peak RSS (VmHWM)", [](const nlohmann::json& r) { return mib(r); });
  add("evaluated per /metrics (incl. gates)", [](const nlohmann::json& r) {
    const nlohmann::json::json_pointer where("/counter/evaluated");
    if (!r.contains(where) || !r.at(where).is_number() || r.at(where).get<double>() < 0) return std::string("n/a");
    return std::format("{:.0f} (`{}`)", r.at(where).get<double>(), r.at("counter").value("metric", ""));
  });
  add("wall time", [](const nlohmann::json& r) { return std::format("{:.0f} s", r.value("seconds", 0.0)); });
  add("failed requests", [](const nlohmann::json& r) { return std::to_string(arm_stats(r, "").errors); });
  auto gate = [](auto fn) {
    return [fn](const nlohmann::json& r) { return r.contains("gates") ? fn(r.at("gates")) : std::string("not run"); };
  };
  add("gate: greedy first token warm = cold", gate(gate_first_token));
  add("gate: first token in the run = cold", gate([](const nlohmann::json& g) {
        const auto& f = g.at("first_token");
        if (f.contains("workload_equal") && f.at("workload_equal").is_null()) return std::string("— (the run forced a tool call)");
        return check(f.value("workload_equal", false)) + " " + code(f.value("workload", ""));
      }));
  add("gate: same bytes, fresh cache key → same output",
      gate([](const nlohmann::json& g) { return check(g.at("determinism").value("equal", false)); }));
  add("gate: answer depends on the cached prefix", gate(gate_context));
  add("output pinned to 1 token", [&](const nlohmann::json& r) { return pinned_check(w, r); });
  if (names.size() >= 2) facts.add_row({"same prompt tokens on both servers", prompt_agreement(w, names[0], names[1]), ""});
  return facts.render();
}

// Tokens per second of each target, the median over repetitions, and the per-repetition ratio.
std::string throughput_table(const nlohmann::json& w, const std::vector<std::string>& names) {
  TargetTable table(names, {"measure"});
  table.group("", "÷");
  auto median_of = [&](const std::string& name, double Throughput::*field) {
    std::vector<double> values;
    for (int rep = 0; rep < repetitions(w); ++rep) {
      if (const auto t = throughput(target_of(w, name), rep)) values.push_back((*t).*field);
    }
    return values.empty() ? std::optional<double>() : std::optional<double>(summarize(values).median);
  };
  auto row = [&](const std::string& label, double Throughput::*field) {
    std::vector<std::string> cells;
    std::vector<std::optional<double>> medians;
    for (const auto& n : names) {
      medians.push_back(median_of(n, field));
      cells.push_back(medians.back() ? format_number(*medians.back()) : "n/a");
    }
    const auto r = medians.size() >= 2 && medians[0] && medians[1] ? ratio(*medians[0], *medians[1]) : std::nullopt;
    table.begin_row({label});
    table.cells(cells, format_ratio(r));
  };
  row("generated tokens/s", &Throughput::generated_per_s);
  row("prompt tokens/s", &Throughput::prompt_per_s);
  std::string out = table.render() + "\n";
  out += "Tokens per second over each repetition's wall time (first request sent → last answer complete), median over "
         "repetitions.";
  if (names.size() >= 2) {
    out += std::format(" Generated tokens/s {} ÷ {} per repetition: {}.", names[0], names[1],
                       spread_cell(per_rep_throughput_ratios(w, names[0], names[1])));
  }
  return out + "\n\n";
}

std::string checks_block(const nlohmann::json& w, const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    const auto& record = target_of(w, n);
    if (!record.contains("checks")) continue;
    out += std::format("Checks on {}:\n\n", n);
    for (const auto& c : record.at("checks")) {
      out += std::format("- {} {} — {}\n", c.value("verdict", "?"), c.value("name", ""), c.value("detail", ""));
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string workload_section(const nlohmann::json& results, const nlohmann::json& w, const ReportStyle& style) {
  const std::vector<std::string> names = server_names(results);
  std::string out = heading(style, 2, w.value("title", w.value("name", "")) + " (`" + w.value("name", "") + "`)");
  out += w.value("description", "") + "\n\n";
  // A workload about memory running out gives llama-server a larger context (workload.h).
  const std::string context = w.contains("llama_ctx_size")
                                  ? std::format("context {} cells (llama-server: {})", w.value("ctx_size", 0),
                                                w.value("llama_ctx_size", 0))
                                  : std::format("context {} cells", w.value("ctx_size", 0));
  out += std::format("{}: {}, {} slot(s); {} request(s) in flight at most. Run order: {}.\n\n",
                     names.size() >= 2 ? "Both servers" : "Server", context, w.value("parallel", 0),
                     w.value("concurrency", 1), run_order(w));
  for (const auto& n : names) {
    const auto& record = target_of(w, n);
    if (record.contains("error")) {
      out += std::format("**{} did not finish:** {}\n\n", n, code(record.at("error").get<std::string>().substr(0, 300)));
    }
  }
  const double noise = workload_noise(results, w);
  out += arm_table(w, names, noise) + "\n";
  out += std::format("TTFT: median (min–max) over the arm's requests, measured by the client. Evaluated: Σ prompt tokens "
                     "the server ran through the model (its own timings.prompt_n). Prefill ms/token: Σ timings.prompt_ms "
                     "÷ Σ evaluated tokens, server side.{}{}\n\n",
                     names.size() >= 2 ? std::format(" Ratios: {} ÷ {}", names[0], names[1]) : "",
                     names.size() < 2 || noise <= kTightSpread
                         ? std::string(names.size() >= 2 ? "." : "")
                         : std::format("; TTFT ratios are ranges (median ratio ÷ and × {:.2f}) because the cold arms were "
                                       "not tight: their slowest repetition took {:.2f}× their fastest.",
                                       noise, noise));
  for (const auto& n : names) {
    const auto& warmup = target_of(w, n).value("warmup", nlohmann::json::object());
    if (const double tokens = warmup.value("tokens", 0.0); tokens > 0) {
      out += std::format("{} also fed {:.0f} warm-up tokens after replies, in no arm above (the summary and the "
                         "warm-up section count them).\n\n",
                         n, tokens);
    }
  }
  out += restart_disk_block(w, names);
  out += toolloop_block(w, names);
  if (repetitions(w) > 1 && names.size() >= 2) {
    out += std::format("Interleaved: {} repetitions (order {}). TTFT {} ÷ {} per repetition (medians over every request): "
                       "{}.\n\n",
                       repetitions(w), run_order(w), names[0], names[1],
                       spread_cell(per_rep_ttft_ratios(w, names[0], names[1])));
  }
  if (w.value("latency", false)) out += latency_block(w, names);
  if (w.value("throughput", false)) out += throughput_table(w, names);
  out += facts_table(w, names) + "\n";
  out += checks_block(w, names);
  for (const auto& plot : list_at(results, "plots")) {
    if (plot.value("workload", "") != w.value("name", "")) continue;
    out += std::format("![{}]({}{})\n\n", plot.value("title", ""), style.image_prefix, plot.value("file", ""));
  }
  return out;
}

}  // namespace prefixd::bench
