#include "compare/report.h"

#include <format>
#include <map>

#include "bench/table.h"
#include "compare/gates.h"
#include "compare/stats.h"

namespace prefixd::compare {
namespace {

const std::string kPrefixd = "prefixd";
const std::string kLlama = "llama-server";

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

std::string ttft_cell(const ArmStats& s) { return bench::format_summary(s.ttft_ms); }

std::string prompt_cell(const ArmStats& a, const ArmStats& b) {
  const auto& s = a.n > 0 ? a.prompt_tokens : b.prompt_tokens;
  if (s.n == 0) return "n/a";
  if (s.min == s.max) return bench::format_number(s.median);
  return std::format("{} ({}–{})", bench::format_number(s.median), bench::format_number(s.min), bench::format_number(s.max));
}

std::string check(bool ok) { return ok ? "✓" : "✗"; }

std::string diff_text(const nlohmann::json& value) {
  return value.is_number() ? std::format("{:.1e}", value.get<double>()) : "n/a";
}

std::string gate_first_token(const nlohmann::json& g) {
  if (!g.contains("first_token")) return "not run";
  const auto& f = g.at("first_token");
  std::string out = f.value("equal", false) ? "✓ " + code(f.value("warm", ""))
                                            : "✗ warm " + code(f.value("warm", "")) + ", cold " + code(f.value("cold", ""));
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
std::string prompt_agreement(const nlohmann::json& w) {
  const auto& a = target_of(w, kPrefixd);
  const auto& b = target_of(w, kLlama);
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
  if (!record.contains("gates")) return "not run";
  return gates_passed(record.at("gates")) ? "✓" : "✗";
}

std::string workload_section(const nlohmann::json& results, const nlohmann::json& w, const ReportStyle& style) {
  std::string out = heading(style, 2, w.value("title", w.value("name", "")) + " (`" + w.value("name", "") + "`)");
  out += w.value("description", "") + "\n\n";
  const auto& p = target_of(w, kPrefixd);
  const auto& l = target_of(w, kLlama);
  out += std::format("Both servers: context {} cells, {} slot(s); {} request(s) in flight at most. Run order: {}.\n\n",
                     w.value("ctx_size", 0), w.value("parallel", 0), w.value("concurrency", 1),
                     [&] {
                       std::string s;
                       for (const auto& name : list_at(w, "order")) s += (s.empty() ? "" : ", then ") + name.get<std::string>();
                       return s.empty() ? std::string("n/a") : s;
                     }());
  for (const auto* record : {&p, &l}) {
    if (record->contains("error")) {
      out += std::format("**{} did not finish:** {}\n\n", record->value("target", "?"),
                         code(record->at("error").get<std::string>().substr(0, 300)));
    }
  }
  const double noise = workload_noise(results, w);
  bench::Table table({"arm", "n", "prompt tokens", "TTFT ms prefixd", "TTFT ms llama-server", "TTFT ÷", "evaluated prefixd",
                      "evaluated llama-server", "evaluated ÷", "hit prefixd", "hit llama-server"});
  auto row = [&](const std::string& label, const std::string& arm) {
    const ArmStats a = arm_stats(p, arm);
    const ArmStats b = arm_stats(l, arm);
    table.add_row({label, std::to_string(std::max(a.n, b.n)), prompt_cell(a, b), ttft_cell(a), ttft_cell(b),
                   ratio_cell(a.ttft_ms, b.ttft_ms, noise), sum_cell(a), sum_cell(b),
                   evaluated_ratio_cell(a, b),
                   percent_cell(a.cached_sum, a.prompt_sum), percent_cell(b.cached_sum, b.prompt_sum)});
  };
  for (const auto& arm : list_at(w, "arms")) {
    const std::string name = arm.value("name", "");
    row(arm.value("cold", false) && !name.starts_with("cold") ? name + " (cold)" : name, name);
  }
  row("**all requests**", "");
  out += table.render() + "\n";
  out += std::format("TTFT: median (min–max) over the arm's requests, measured by the client. Evaluated: Σ prompt tokens "
                     "the server ran through the model (its own timings.prompt_n). Ratios: prefixd ÷ llama-server{}.\n\n",
                     noise <= kTightSpread
                         ? ""
                         : std::format("; TTFT ratios are ranges (median ratio ÷ and × {:.2f}) because the cold arms were "
                                       "not tight: their slowest repetition took {:.2f}× their fastest",
                                       noise, noise));

  bench::Table facts({"", "prefixd", "llama-server"});
  facts.add_row({"peak RSS (VmHWM)", mib(p), mib(l)});
  auto counter = [](const nlohmann::json& r) {
    const nlohmann::json::json_pointer where("/counter/evaluated");
    if (!r.contains(where) || !r.at(where).is_number() || r.at(where).get<double>() < 0) return std::string("n/a");
    return std::format("{:.0f} (`{}`)", r.at(where).get<double>(), r.at("counter").value("metric", ""));
  };
  facts.add_row({"evaluated per /metrics (incl. gates)", counter(p), counter(l)});
  facts.add_row({"wall time", std::format("{:.0f} s", p.value("seconds", 0.0)), std::format("{:.0f} s", l.value("seconds", 0.0))});
  auto errors = [](const nlohmann::json& r) { return std::to_string(arm_stats(r, "").errors); };
  facts.add_row({"failed requests", errors(p), errors(l)});
  auto gate = [](const nlohmann::json& r, auto fn) { return r.contains("gates") ? fn(r.at("gates")) : std::string("not run"); };
  facts.add_row({"gate: greedy first token warm = cold", gate(p, gate_first_token), gate(l, gate_first_token)});
  auto workload_equal = [](const nlohmann::json& g) {
    const auto& f = g.at("first_token");
    return check(f.value("workload_equal", false)) + " " + code(f.value("workload", ""));
  };
  facts.add_row({"gate: first token in the run = cold", gate(p, workload_equal), gate(l, workload_equal)});
  auto determinism = [](const nlohmann::json& g) { return check(g.at("determinism").value("equal", false)); };
  facts.add_row({"gate: same bytes, fresh cache key → same output", gate(p, determinism), gate(l, determinism)});
  facts.add_row({"gate: answer depends on the cached prefix", gate(p, gate_context), gate(l, gate_context)});
  facts.add_row({"output pinned to 1 token", pinned_check(w, p), pinned_check(w, l)});
  facts.add_row({"same prompt tokens on both servers", prompt_agreement(w), ""});
  out += facts.render() + "\n";

  for (const auto& plot : list_at(results, "plots")) {
    if (plot.value("workload", "") != w.value("name", "")) continue;
    out += std::format("![{}]({}{})\n\n", plot.value("title", ""), style.image_prefix, plot.value("file", ""));
  }
  return out;
}

}  // namespace

std::string render_summary(const nlohmann::json& results) {
  bench::Table table({"workload", "evaluated prefixd", "evaluated llama-server", "÷", "TTFT median prefixd",
                      "TTFT median llama-server", "÷", "hit prefixd", "hit llama-server", "peak RSS prefixd",
                      "peak RSS llama-server", "gates prefixd", "gates llama-server"});
  for (const auto& w : list_at(results, "workloads")) {
    const auto& p = target_of(w, kPrefixd);
    const auto& l = target_of(w, kLlama);
    const ArmStats a = arm_stats(p, "");
    const ArmStats b = arm_stats(l, "");
    const double noise = workload_noise(results, w);
    table.add_row({w.value("name", ""), sum_cell(a), sum_cell(b),
                   evaluated_ratio_cell(a, b),
                   a.ttft_ms.n ? bench::format_number(a.ttft_ms.median) + " ms" : "n/a",
                   b.ttft_ms.n ? bench::format_number(b.ttft_ms.median) + " ms" : "n/a", ratio_cell(a.ttft_ms, b.ttft_ms, noise),
                   percent_cell(a.cached_sum, a.prompt_sum), percent_cell(b.cached_sum, b.prompt_sum), mib(p), mib(l),
                   gates_cell(p), gates_cell(l)});
  }
  return table.render();
}

std::string render_targets(const nlohmann::json& results) {
  bench::Table table({"issue target", "prefixd evaluates fewer prompt tokens", "prefixd has the lower median TTFT"});
  int rows = 0;
  for (const auto& w : list_at(results, "workloads")) {
    const std::string name = w.value("name", "");
    if (name != "multisession" && name != "shared" && name != "edit") continue;
    const ArmStats a = arm_stats(target_of(w, kPrefixd), "");
    const ArmStats b = arm_stats(target_of(w, kLlama), "");
    if (a.n == 0 || b.n == 0) continue;
    ++rows;
    table.add_row({name,
                   std::format("{} {} vs {}", check(a.evaluated_sum < b.evaluated_sum), a.evaluated_sum, b.evaluated_sum),
                   std::format("{} {} vs {} ms", check(a.ttft_ms.median < b.ttft_ms.median), bench::format_number(a.ttft_ms.median),
                               bench::format_number(b.ttft_ms.median))});
  }
  return rows == 0 ? "" : "At equal memory budget:\n\n" + table.render();
}

std::string render_report(const nlohmann::json& results, const ReportStyle& style) {
  const auto& o = results.value("options", nlohmann::json::object());
  const auto& m = results.value("machine", nlohmann::json::object());
  std::string out = heading(style, 1, "prefixd vs llama-server: " + results.value("date", std::string("?")) + ", " +
                                          m.value("hostname", std::string("?")));
  out += std::format("Run started {} on `{}`: {} CPUs ({}), {} MiB RAM, load average {:.2f} at start; {:.0f} minutes in all.\n\n",
                     results.value("started_at", "?"), m.value("hostname", "?"), m.value("cpus", 0), m.value("cpu_model", "?"),
                     m.value("mem_total_mib", 0L), m.value("load_average_1m", -1.0), results.value("seconds", 0.0) / 60.0);
  out += std::format("Model `{}`; BENCH_SCALE {}; seed {}; {} threads on both servers; {:.3f} words per token (measured).\n\n",
                     o.value("model", "?"), o.value("scale", 1.0), o.value("seed", 0), o.value("threads", 0),
                     o.value("words_per_token", 0.0));
  out += std::format("Equal memory budget: prefixd `--prompt-cache-capacity-bytes {}` = llama-server `--cache-ram {}` "
                     "(MiB). Same `-c` on both: ",
                     static_cast<long long>(o.value("cache_mib", 0)) * 1024 * 1024, o.value("cache_mib", 0));
  std::string notes;
  for (const auto& s : list_at(results, "servers")) {
    notes += std::format("{}: {}; ", s.value("name", "?"), s.value("context_note", ""));
  }
  out += notes + "flash attention off on both.\n\n";
  bench::Table servers({"server", "version", "binary", "extra arguments"});
  for (const auto& s : list_at(results, "servers")) {
    servers.add_row({s.value("name", "?"), s.value("version", "?"), "`" + s.value("binary", "?") + "`", s.value("extra_args", "")});
  }
  out += servers.render() + "\n";
  out += "How to read: TTFT is measured by the client, from sending the request to the first streamed token. "
         "\"Evaluated\" is the prompt tokens a server ran through the model, from its own counters "
         "(`timings.prompt_n`; prefixd's equals `prompt_cache.fed_tokens`), never estimated. Hit = cached ÷ prompt "
         "tokens. \"÷\" columns are prefixd ÷ llama-server: below 1, prefixd evaluated less or answered sooner. A TTFT "
         "ratio is a point only when the cold arms were tight (each repetition within ×1.5 of its fastest); else it is "
         "the band that spread allows (the median ratio divided and multiplied by the worst cold arm's max ÷ min).\n\n";
  out += heading(style, 2, "Summary");
  out += render_summary(results) + "\n";
  out += render_targets(results) + "\n";
  for (const auto& plot : list_at(results, "plots")) {
    if (!plot.value("workload", std::string()).empty()) continue;
    out += std::format("![{}]({}{})\n\n", plot.value("title", ""), style.image_prefix, plot.value("file", ""));
  }
  for (const auto& w : list_at(results, "workloads")) out += workload_section(results, w, style);
  return out;
}

std::string splice_report(const std::string& page, const std::string& report) {
  const std::string block = std::string(kReportBegin) + "\n\n" + report + "\n" + kReportEnd;
  const auto begin = page.find(kReportBegin);
  const auto end = begin == std::string::npos ? std::string::npos : page.find(kReportEnd, begin);
  if (begin == std::string::npos || end == std::string::npos) {
    return page + (page.empty() || page.ends_with("\n\n") ? "" : page.ends_with('\n') ? "\n" : "\n\n") + block + "\n";
  }
  return page.substr(0, begin) + block + page.substr(end + std::string_view(kReportEnd).size());
}

}  // namespace prefixd::compare
