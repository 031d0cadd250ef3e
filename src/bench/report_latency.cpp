#include "bench/report_latency.h"

#include <algorithm>
#include <cmath>
#include <format>
#include <map>

#include "bench/report_cells.h"
#include "bench/report_stats.h"
#include "bench/stats.h"
#include "bench/table.h"

namespace prefixd::bench {
namespace {

// The acceptance bars of the sweep: prefixd's TTFT p99 at most the peer's, its output tokens/s at
// least this share of the peer's.
constexpr double kThroughputFloor = 0.95;

std::int64_t count_of(const nlohmann::json& r, const char* key) {
  const auto it = r.find(key);
  return it != r.end() && it->is_number_integer() ? it->get<std::int64_t>() : -1;
}

// "123 (110–130)" over repetitions; the median alone for one.
std::string over_reps(const std::vector<double>& values) {
  if (values.empty()) return "n/a";
  const Summary s = summarize(values);
  if (values.size() == 1) return format_number(s.median);
  return std::format("{} ({}–{})", format_number(s.median), format_number(s.min), format_number(s.max));
}

// The measure of every repetition of one target.
std::vector<double> per_rep(const nlohmann::json& workload, const std::string& name, double Latency::*measure) {
  std::vector<double> out;
  for (int rep = 0; rep < repetitions(workload); ++rep) {
    if (const auto l = latency_of(target_of(workload, name), rep)) out.push_back((*l).*measure);
  }
  return out;
}

std::vector<double> per_rep_optional(const nlohmann::json& workload, const std::string& name,
                                     std::optional<double> Latency::*measure) {
  std::vector<double> out;
  for (int rep = 0; rep < repetitions(workload); ++rep) {
    const auto l = latency_of(target_of(workload, name), rep);
    if (l && (*l).*measure) out.push_back(*((*l).*measure));
  }
  return out;
}

}  // namespace

std::vector<const nlohmann::json*> sweep_points(const nlohmann::json& results) {
  std::vector<const nlohmann::json*> points;
  for (const auto& w : list_at(results, "workloads")) {
    if (w.value("clients", 0) > 0) points.push_back(&w);
  }
  std::ranges::sort(points, {}, [](const nlohmann::json* w) { return w->value("clients", 0); });
  return points;
}

std::optional<double> percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return std::nullopt;
  std::ranges::sort(samples);
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size())));
  return samples[std::clamp<std::size_t>(rank, 1, samples.size()) - 1];
}

std::optional<Latency> latency_of(const nlohmann::json& record, int rep) {
  Latency out;
  std::vector<double> ttft, itl;
  double first = -1, last = -1, generated = 0;
  for (const auto& r : list_at(record, "requests")) {
    if (r.value("rep", 0) != rep) continue;
    if (r.contains("error")) {
      ++out.errors;
      continue;
    }
    const double start = r.value("start_s", -1.0);
    const double total_ms = r.value("total_ms", -1.0);
    const double ttft_ms = r.value("ttft_ms", -1.0);
    if (start < 0 || total_ms < 0 || ttft_ms < 0) continue;
    ++out.requests;
    ttft.push_back(ttft_ms);
    for (const auto& gap : list_at(r, "itl_ms")) itl.push_back(gap.get<double>());
    first = first < 0 ? start : std::min(first, start);
    last = std::max(last, start + total_ms / 1000.0);
    generated += static_cast<double>(std::max<std::int64_t>(0, count_of(r, "completion_tokens")));
  }
  if (out.requests == 0 || !(last > first)) return std::nullopt;
  out.ttft_p50_ms = *percentile(ttft, 0.50);
  out.ttft_p99_ms = *percentile(ttft, 0.99);
  out.itl_p50_ms = percentile(itl, 0.50);
  out.itl_p99_ms = percentile(itl, 0.99);
  out.output_per_s = generated / (last - first);
  out.requests_per_s = out.requests / (last - first);
  return out;
}

std::vector<double> per_rep_latency_ratios(const nlohmann::json& workload, const std::string& a, const std::string& b,
                                           double Latency::*measure) {
  std::vector<double> out;
  for (int rep = 0; rep < repetitions(workload); ++rep) {
    const auto x = latency_of(target_of(workload, a), rep);
    const auto y = latency_of(target_of(workload, b), rep);
    if (!x || !y) continue;
    if (const auto r = ratio((*x).*measure, (*y).*measure)) out.push_back(*r);
  }
  return out;
}

std::string latency_block(const nlohmann::json& w, const std::vector<std::string>& names) {
  Table table({"target", "requests", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "output tokens/s",
               "requests/s"});
  for (const auto& n : names) {
    int requests = 0;
    for (int rep = 0; rep < repetitions(w); ++rep) {
      if (const auto l = latency_of(target_of(w, n), rep)) requests += l->requests;
    }
    table.add_row({n, std::to_string(requests), over_reps(per_rep(w, n, &Latency::ttft_p50_ms)),
                   over_reps(per_rep(w, n, &Latency::ttft_p99_ms)), over_reps(per_rep_optional(w, n, &Latency::itl_p50_ms)),
                   over_reps(per_rep_optional(w, n, &Latency::itl_p99_ms)), over_reps(per_rep(w, n, &Latency::output_per_s)),
                   over_reps(per_rep(w, n, &Latency::requests_per_s))});
  }
  std::string out = table.render() + "\n";
  out += "Per repetition over all its requests, then the median (min–max) over repetitions. TTFT: request sent → first "
         "token, at the client. ITL: the gaps between consecutive streamed tokens of every request. Percentiles by nearest "
         "rank. Output tokens/s: Σ completion tokens ÷ (first request sent → last answer complete).";
  if (names.size() >= 2) {
    out += std::format(" Per repetition, {} ÷ {}: TTFT p99 {}; output tokens/s {}.", names[0], names[1],
                       spread_cell(per_rep_latency_ratios(w, names[0], names[1], &Latency::ttft_p99_ms)),
                       spread_cell(per_rep_latency_ratios(w, names[0], names[1], &Latency::output_per_s)));
  }
  return out + "\n\n";
}

std::string sweep_section(const nlohmann::json& results, const ReportStyle& style) {
  const auto points = sweep_points(results);
  if (points.empty()) return "";
  const std::vector<std::string> names = server_names(results);
  std::string out = heading(style, 2, "Concurrency sweep");
  out += std::format(
      "The `sweep-N` workloads side by side: N clients, each in a conversation of its own (one shared system prompt), "
      "closed loop, and as many slots as clients on every server ({} on prefixd, -np on llama-server). Each cell: the "
      "median (min–max) over repetitions of the measure over all requests of one repetition.\n\n",
      "--parallel");
  std::vector<std::string> headers{"clients", "target", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms",
                                   "output tokens/s"};
  Table table(headers);
  for (const auto* w : points) {
    for (const auto& n : names) {
      table.add_row({std::to_string(w->value("clients", 0)), n, over_reps(per_rep(*w, n, &Latency::ttft_p50_ms)),
                     over_reps(per_rep(*w, n, &Latency::ttft_p99_ms)),
                     over_reps(per_rep_optional(*w, n, &Latency::itl_p50_ms)),
                     over_reps(per_rep_optional(*w, n, &Latency::itl_p99_ms)),
                     over_reps(per_rep(*w, n, &Latency::output_per_s))});
    }
  }
  out += table.render() + "\n";
  if (names.size() >= 2) {
    const std::string& ours = names[0];
    for (std::size_t k = 1; k < names.size(); ++k) {
      const std::string& peer = names[k];
      Table ratios({"clients", std::format("TTFT p99 {} ÷ {}", ours, peer), std::format("output tokens/s {} ÷ {}", ours, peer)});
      std::vector<std::string> slower, fewer;
      for (const auto* w : points) {
        const auto ttft = per_rep_latency_ratios(*w, ours, peer, &Latency::ttft_p99_ms);
        const auto tput = per_rep_latency_ratios(*w, ours, peer, &Latency::output_per_s);
        const std::string clients = std::to_string(w->value("clients", 0));
        ratios.add_row({clients, spread_cell(ttft), spread_cell(tput)});
        if (ttft.empty() || summarize(ttft).median > 1.0) slower.push_back(clients);
        if (tput.empty() || summarize(tput).median < kThroughputFloor) fewer.push_back(clients);
      }
      out += ratios.render() + "\n";
      auto list = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
        return s;
      };
      out += std::format("- {} TTFT p99 of {} ≤ {}'s at every point (median of the per-repetition ratios){}\n",
                         slower.empty() ? "PASS" : "MISS", ours, peer,
                         slower.empty() ? "" : "; not at " + list(slower) + " client(s)");
      out += std::format("- {} output tokens/s of {} ≥ {:.2f}× {}'s at every point{}\n\n", fewer.empty() ? "PASS" : "MISS",
                         ours, kThroughputFloor, peer, fewer.empty() ? "" : "; not at " + list(fewer) + " client(s)");
    }
  }
  for (const auto& plot : list_at(results, "plots")) {
    if (plot.value("workload", "") != "sweep") continue;
    out += std::format("![{}]({}{})\n\n", plot.value("title", ""), style.image_prefix, plot.value("file", ""));
  }
  return out;
}

}  // namespace prefixd::bench
