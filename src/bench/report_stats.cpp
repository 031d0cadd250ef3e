#include "bench/report_stats.h"

#include <format>
#include <vector>

namespace prefixd::bench {
namespace {

std::int64_t count_at(const nlohmann::json& r, const char* key) {
  const auto it = r.find(key);
  return it != r.end() && it->is_number() ? it->get<std::int64_t>() : -1;
}

// The worst spread of a workload's cold arms with at least two repetitions, on every server it
// ran on; nothing when it has no such arm.
std::optional<double> cold_arms_spread(const nlohmann::json& workload) {
  std::optional<double> worst;
  if (!workload.contains("arms") || !workload.contains("targets")) return worst;
  for (const auto& arm : workload.at("arms")) {
    if (!arm.value("cold", false)) continue;
    for (const auto& [name, record] : workload.at("targets").items()) {
      const ArmStats s = arm_stats(record, arm.value("name", ""));
      if (s.ttft_ms.n < 2) continue;
      worst = std::max(worst.value_or(1.0), spread(s.ttft_ms));
    }
  }
  return worst;
}

}  // namespace

const nlohmann::json& list_at(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::array();  // immutable: "nothing there"
  if (!j.is_object()) return kEmpty;
  const auto it = j.find(key);
  return it == j.end() ? kEmpty : *it;
}

bool is_tight(const Summary& s) { return spread(s) <= kTightSpread; }

double spread(const Summary& s) { return s.n < 2 || !(s.min > 0) ? 1.0 : s.max / s.min; }

std::string ratio_cell(const Summary& a, const Summary& b, double noise) {
  if (a.n == 0 || b.n == 0 || !(b.median > 0)) return "n/a";
  const double r = a.median / b.median;
  if (noise <= kTightSpread) return format_number(r) + "×";
  return std::format("{}–{}×", format_number(r / noise), format_number(r * noise));
}

std::string count_ratio_cell(double a, double b) {
  if (!(b > 0) || a < 0) return "n/a";
  return format_number(a / b) + "×";
}

std::string percent_cell(std::int64_t part, std::int64_t whole) {
  if (whole <= 0 || part < 0) return "n/a";
  return std::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

ArmStats arm_stats(const nlohmann::json& record, const std::string& arm, int rep) {
  ArmStats s;
  std::vector<double> ttft;
  std::vector<double> prompt;
  if (!record.contains("requests")) return s;
  for (const auto& r : record.at("requests")) {
    if (!arm.empty() && r.value("arm", "") != arm) continue;
    if (rep >= 0 && r.value("rep", 0) != rep) continue;
    if (r.contains("error")) {
      ++s.errors;
      continue;
    }
    ++s.n;
    const double t = r.value("ttft_ms", -1.0);
    if (t >= 0) {
      ttft.push_back(t);
      s.ttft_sum_ms += t;
    }
    const auto p = count_at(r, "prompt_tokens");
    const auto e = count_at(r, "evaluated");
    const auto c = count_at(r, "cached");
    if (p < 0 || e < 0 || c < 0) s.counts_missing = true;
    const double prefill_ms = r.value("server_prompt_ms", -1.0);
    if (prefill_ms >= 0 && e > 0) {
      s.prefill_ms_sum += prefill_ms;
      s.prefill_tokens += e;
    }
    if (p >= 0) {
      prompt.push_back(static_cast<double>(p));
      s.prompt_sum += p;
    }
    s.evaluated_sum += std::max<std::int64_t>(0, e);
    s.cached_sum += std::max<std::int64_t>(0, c);
    if (count_at(r, "completion_tokens") != 1) ++s.not_one_token;
  }
  s.ttft_ms = summarize(ttft);
  s.prompt_tokens = summarize(prompt);
  return s;
}

std::string prefill_cell(const ArmStats& s) {
  if (s.prefill_tokens <= 0) return "n/a";
  return format_number(s.prefill_ms_sum / static_cast<double>(s.prefill_tokens)) + " ms";
}

std::string ttft_sum_cell(const ArmStats& s) { return s.n == 0 ? "n/a" : format_number(s.ttft_sum_ms) + " ms"; }

int repetitions(const nlohmann::json& workload) {
  const auto& reps = list_at(workload, "reps");
  return std::max<int>(1, static_cast<int>(reps.size()));
}

namespace {

const nlohmann::json& record_of(const nlohmann::json& workload, const std::string& target) {
  static const nlohmann::json kEmpty = nlohmann::json::object();  // immutable: "did not run"
  if (!workload.contains("targets") || !workload.at("targets").contains(target)) return kEmpty;
  return workload.at("targets").at(target);
}

}  // namespace

std::vector<double> per_rep_ttft_ratios(const nlohmann::json& workload, const std::string& a, const std::string& b) {
  std::vector<double> out;
  for (int rep = 0; rep < repetitions(workload); ++rep) {
    const Summary x = arm_stats(record_of(workload, a), "", rep).ttft_ms;
    const Summary y = arm_stats(record_of(workload, b), "", rep).ttft_ms;
    if (const auto r = ratio(x.median, y.median); x.n > 0 && r) out.push_back(*r);
  }
  return out;
}

std::optional<Throughput> throughput(const nlohmann::json& record, int rep) {
  double first = -1;
  double last = -1;
  double generated = 0;
  double prompt = 0;
  for (const auto& r : list_at(record, "requests")) {
    if (r.value("rep", 0) != rep || r.contains("error")) continue;
    const double start = r.value("start_s", -1.0);
    const double total_ms = r.value("total_ms", -1.0);
    if (start < 0 || total_ms < 0) continue;
    first = first < 0 ? start : std::min(first, start);
    last = std::max(last, start + total_ms / 1000.0);
    generated += static_cast<double>(std::max<std::int64_t>(0, count_at(r, "completion_tokens")));
    prompt += static_cast<double>(std::max<std::int64_t>(0, count_at(r, "prompt_tokens")));
  }
  if (first < 0 || !(last > first)) return std::nullopt;
  const double seconds = last - first;
  return Throughput{seconds, generated / seconds, prompt / seconds};
}

std::vector<double> per_rep_throughput_ratios(const nlohmann::json& workload, const std::string& a, const std::string& b) {
  std::vector<double> out;
  for (int rep = 0; rep < repetitions(workload); ++rep) {
    const auto x = throughput(record_of(workload, a), rep);
    const auto y = throughput(record_of(workload, b), rep);
    if (!x || !y) continue;
    if (const auto r = ratio(x->generated_per_s, y->generated_per_s)) out.push_back(*r);
  }
  return out;
}

std::string spread_cell(const std::vector<double>& ratios) {
  if (ratios.empty()) return "n/a";
  const Summary s = summarize(ratios);
  if (ratios.size() == 1) return format_number(s.median) + "× (1 repetition)";
  return std::format("{}× ({}–{}× over {} repetitions)", format_number(s.median), format_number(s.min), format_number(s.max),
                     ratios.size());
}

double workload_noise(const nlohmann::json& results, const nlohmann::json& workload) {
  if (const auto own = cold_arms_spread(workload)) return *own;
  std::optional<double> run;
  for (const auto& w : list_at(results, "workloads")) {
    if (const auto v = cold_arms_spread(w)) run = std::max(run.value_or(1.0), *v);
  }
  return run.value_or(1.0);
}

}  // namespace prefixd::bench
