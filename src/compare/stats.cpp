#include "compare/stats.h"

#include <format>
#include <vector>

namespace prefixd::compare {
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

bool is_tight(const bench::Summary& s) { return spread(s) <= kTightSpread; }

double spread(const bench::Summary& s) { return s.n < 2 || !(s.min > 0) ? 1.0 : s.max / s.min; }

std::string ratio_cell(const bench::Summary& a, const bench::Summary& b, double noise) {
  if (a.n == 0 || b.n == 0 || !(b.median > 0)) return "n/a";
  const double r = a.median / b.median;
  if (noise <= kTightSpread) return bench::format_number(r) + "×";
  return std::format("{}–{}×", bench::format_number(r / noise), bench::format_number(r * noise));
}

std::string count_ratio_cell(double a, double b) {
  if (!(b > 0) || a < 0) return "n/a";
  return bench::format_number(a / b) + "×";
}

std::string percent_cell(std::int64_t part, std::int64_t whole) {
  if (whole <= 0 || part < 0) return "n/a";
  return std::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

ArmStats arm_stats(const nlohmann::json& record, const std::string& arm) {
  ArmStats s;
  std::vector<double> ttft;
  std::vector<double> prompt;
  if (!record.contains("requests")) return s;
  for (const auto& r : record.at("requests")) {
    if (!arm.empty() && r.value("arm", "") != arm) continue;
    if (r.contains("error")) {
      ++s.errors;
      continue;
    }
    ++s.n;
    const double t = r.value("ttft_ms", -1.0);
    if (t >= 0) ttft.push_back(t);
    const auto p = count_at(r, "prompt_tokens");
    const auto e = count_at(r, "evaluated");
    const auto c = count_at(r, "cached");
    if (p < 0 || e < 0 || c < 0) s.counts_missing = true;
    if (p >= 0) {
      prompt.push_back(static_cast<double>(p));
      s.prompt_sum += p;
    }
    s.evaluated_sum += std::max<std::int64_t>(0, e);
    s.cached_sum += std::max<std::int64_t>(0, c);
    if (count_at(r, "completion_tokens") != 1) ++s.not_one_token;
  }
  s.ttft_ms = bench::summarize(ttft);
  s.prompt_tokens = bench::summarize(prompt);
  return s;
}

double workload_noise(const nlohmann::json& results, const nlohmann::json& workload) {
  if (const auto own = cold_arms_spread(workload)) return *own;
  std::optional<double> run;
  for (const auto& w : list_at(results, "workloads")) {
    if (const auto v = cold_arms_spread(w)) run = std::max(run.value_or(1.0), *v);
  }
  return run.value_or(1.0);
}

}  // namespace prefixd::compare
