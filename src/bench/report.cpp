#include "bench/report.h"

#include <filesystem>
#include <format>

#include "bench/report_cells.h"
#include "bench/report_latency.h"
#include "bench/report_tokens.h"

namespace prefixd::bench {

std::string render_summary(const nlohmann::json& results) {
  const std::vector<std::string> names = server_names(results);
  TargetTable table(names, {"workload"});
  table.group("evaluated", "÷");
  table.group("TTFT median", "÷");
  table.group("hit");
  table.group("peak RSS");
  table.group("gates");
  table.group("TTFT Σ");
  table.group("prefill ms/token");
  for (const auto& w : list_at(results, "workloads")) {
    std::vector<ArmStats> s;
    for (const auto& n : names) s.push_back(arm_stats(target_of(w, n), ""));
    if (s.empty()) continue;
    const ArmStats& a = s.front();
    const ArmStats& b = s.size() > 1 ? s[1] : s.front();
    std::vector<std::string> evaluated, ttft, hit, rss, gates, ttft_sum, prefill;
    std::vector<TokenCount> tokens;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto& record = target_of(w, names[i]);
      tokens.push_back(token_count(record));
      evaluated.push_back(s[i].n == 0 ? "n/a" : std::to_string(tokens.back().total()) + (s[i].counts_missing ? "?" : ""));
      ttft.push_back(s[i].ttft_ms.n ? format_number(s[i].ttft_ms.median) + " ms" : "n/a");
      hit.push_back(percent_cell(s[i].cached_sum, s[i].prompt_sum));
      rss.push_back(mib(record));
      gates.push_back(gates_cell(record));
      ttft_sum.push_back(ttft_sum_cell(s[i]));
      prefill.push_back(prefill_cell(s[i]));
    }
    table.begin_row({w.value("name", "")});
    const TokenCount& ta = tokens.front();
    const TokenCount& tb = tokens.size() > 1 ? tokens[1] : tokens.front();
    table.cells(evaluated, a.n == 0 || b.n == 0 ? "n/a"
                                                : count_ratio_cell(static_cast<double>(ta.total()), static_cast<double>(tb.total())));
    table.cells(ttft, ratio_cell(a.ttft_ms, b.ttft_ms, workload_noise(results, w)));
    table.cells(hit);
    table.cells(rss);
    table.cells(gates);
    table.cells(ttft_sum);
    table.cells(prefill);
  }
  return table.render();
}

std::string render_interleaved(const nlohmann::json& results) {
  const std::vector<std::string> names = server_names(results);
  if (names.size() < 2) return "";
  Table table({"workload", "repetitions", "TTFT " + names[0] + " ÷ " + names[1] + " per repetition",
               "generated tokens/s ÷ per repetition"});
  int rows = 0;
  for (const auto& w : list_at(results, "workloads")) {
    if (repetitions(w) < 2) continue;
    ++rows;
    table.add_row({w.value("name", ""), std::to_string(repetitions(w)), spread_cell(per_rep_ttft_ratios(w, names[0], names[1])),
                   w.value("throughput", false) ? spread_cell(per_rep_throughput_ratios(w, names[0], names[1])) : "—"});
  }
  return rows == 0 ? ""
                   : "Interleaved repetitions (target order alternating A B B A …): median ratio of the per-repetition "
                     "medians, with their min–max.\n\n" + table.render();
}

std::string render_targets(const nlohmann::json& results) {
  Table table({"issue target", "prefixd evaluates fewer prompt tokens", "prefixd has the lower median TTFT"});
  int rows = 0;
  for (const auto& w : list_at(results, "workloads")) {
    const std::string name = w.value("name", "");
    if (name != "multisession" && name != "shared" && name != "edit") continue;
    const ArmStats a = arm_stats(target_of(w, "prefixd"), "");
    const ArmStats b = arm_stats(target_of(w, "llama-server"), "");
    if (a.n == 0 || b.n == 0) continue;
    ++rows;
    const std::int64_t ea = token_count(target_of(w, "prefixd")).total();
    const std::int64_t eb = token_count(target_of(w, "llama-server")).total();
    table.add_row({name, std::format("{} {} vs {}", check(ea < eb), ea, eb),
                   std::format("{} {} vs {} ms", check(a.ttft_ms.median < b.ttft_ms.median), format_number(a.ttft_ms.median),
                               format_number(b.ttft_ms.median))});
  }
  return rows == 0 ? "" : "At equal memory budget:\n\n" + table.render();
}

std::string render_report(const nlohmann::json& results, const ReportStyle& style) {
  const auto& o = results.value("options", nlohmann::json::object());
  const auto& m = results.value("machine", nlohmann::json::object());
  const std::vector<std::string> names = server_names(results);
  std::string title;
  for (const auto& n : names) title += (title.empty() ? "" : " vs ") + n;
  // The model's file name too: one page may hold the reports of several models (--docs-section).
  const std::string model = o.value("model", std::string());
  const std::string model_note = model.empty() ? "" : ", " + std::filesystem::path(model).filename().string();
  std::string out = heading(style, 1, (title.empty() ? std::string("?") : title) + ": " +
                                          results.value("date", std::string("?")) + ", " +
                                          m.value("hostname", std::string("?")) + model_note);
  out += std::format("Run started {} on `{}`: {} CPUs ({}), {} MiB RAM, load average {:.2f} at start; {:.0f} minutes in all.\n\n",
                     results.value("started_at", "?"), m.value("hostname", "?"), m.value("cpus", 0), m.value("cpu_model", "?"),
                     m.value("mem_total_mib", 0L), m.value("load_average_1m", -1.0), results.value("seconds", 0.0) / 60.0);
  out += std::format("Model `{}`; BENCH_SCALE {}; seed {}; {} threads on both servers; {:.3f} words per token (measured).\n\n",
                     o.value("model", "?"), o.value("scale", 1.0), o.value("seed", 0), o.value("threads", 0),
                     o.value("words_per_token", 0.0));
  constexpr long long kMiB = 1024 * 1024;
  const int cache_mib = o.value("cache_mib", 0);
  if (const int snapshot_mib = o.value("snapshot_mib", 0); snapshot_mib > 0) {
    out += std::format("Equal host memory: prefixd `--prompt-cache-capacity-bytes {}` + "
                       "`--prompt-cache-snapshot-capacity-bytes {}` (host tier + checkpoints) = llama-server "
                       "`--cache-ram {}` (MiB; its prompt cache holds its checkpoints too). Same `-c` on both: ",
                       (cache_mib - snapshot_mib) * kMiB, snapshot_mib * kMiB, cache_mib);
  } else {
    out += std::format("Equal memory budget: prefixd `--prompt-cache-capacity-bytes {}` = llama-server `--cache-ram {}` "
                       "(MiB). Same `-c` on both: ",
                       cache_mib * kMiB, cache_mib);
  }
  std::string notes;
  for (const auto& s : list_at(results, "servers")) {
    notes += std::format("{}: {}; ", s.value("name", "?"), s.value("context_note", ""));
  }
  out += notes + "flash attention: each server's default (on for both on the CPU).\n\n";
  Table servers({"server", "version", "binary", "extra arguments"});
  for (const auto& s : list_at(results, "servers")) {
    servers.add_row({s.value("name", "?"), s.value("version", "?"), "`" + s.value("binary", "?") + "`", s.value("extra_args", "")});
  }
  out += servers.render() + "\n";
  out += "How to read: TTFT is measured by the client, from sending the request to the first streamed token. "
         "\"Evaluated\" is the prompt tokens a server ran through the model, from its own counters "
         "(`timings.prompt_n`; prefixd's equals `prompt_cache.fed_tokens`), never estimated; in the summary, "
         "prefixd's also includes the warm-up tokens it fed after replies (`prefixd_warmup_tokens_total`). Hit = cached ÷ prompt "
         "tokens. TTFT Σ: the first-token waits of every request added up. Prefill ms/token: the server's own prompt "
         "time (`timings.prompt_ms`) summed over the requests that evaluated tokens, ÷ those tokens.";
  if (names.size() >= 2) {
    out += std::format(" \"÷\" columns are {0} ÷ {1}: below 1, {0} evaluated less or answered sooner. A TTFT "
                       "ratio is a point only when the cold arms were tight (each repetition within ×1.5 of its fastest); "
                       "else it is the band that spread allows (the median ratio divided and multiplied by the worst cold "
                       "arm's max ÷ min).",
                       names[0], names[1]);
  }
  out += "\n\n";
  out += heading(style, 2, "Summary");
  out += render_summary(results) + "\n";
  out += render_targets(results) + "\n";
  out += render_token_section(results, style);
  if (const std::string interleaved = render_interleaved(results); !interleaved.empty()) out += interleaved + "\n";
  for (const auto& plot : list_at(results, "plots")) {
    if (!plot.value("workload", std::string()).empty()) continue;
    out += std::format("![{}]({}{})\n\n", plot.value("title", ""), style.image_prefix, plot.value("file", ""));
  }
  out += sweep_section(results, style);
  for (const auto& w : list_at(results, "workloads")) out += workload_section(results, w, style);
  return out;
}

std::string report_begin_marker(const std::string& section) {
  if (section.empty()) return kReportBegin;
  return std::format("<!-- compare-report:begin {0} (written by prefixd-bench compare --docs --docs-section {0}) -->",
                     section);
}

std::string report_end_marker(const std::string& section) {
  return section.empty() ? std::string(kReportEnd) : std::format("<!-- compare-report:end {} -->", section);
}

std::string splice_report(const std::string& page, const std::string& report, const std::string& section) {
  const std::string begin_marker = report_begin_marker(section);
  const std::string end_marker = report_end_marker(section);
  const std::string block = begin_marker + "\n\n" + report + "\n" + end_marker;
  // The marker up to its parenthesis, which names the command that wrote it.
  const std::string begin_head = begin_marker.substr(0, begin_marker.find(" (") + 2);
  const auto begin = page.find(begin_head);
  const auto end = begin == std::string::npos ? std::string::npos : page.find(end_marker, begin);
  if (begin == std::string::npos || end == std::string::npos) {
    return page + (page.empty() || page.ends_with("\n\n") ? "" : page.ends_with('\n') ? "\n" : "\n\n") + block + "\n";
  }
  return page.substr(0, begin) + block + page.substr(end + end_marker.size());
}

}  // namespace prefixd::bench
