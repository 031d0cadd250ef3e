#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <format>
#include <numeric>

namespace prefixd::bench {

Summary summarize(std::vector<double> samples) {
  Summary s;
  s.n = samples.size();
  if (samples.empty()) return s;
  std::ranges::sort(samples);
  const std::size_t mid = samples.size() / 2;
  s.median = samples.size() % 2 == 1 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2.0;
  s.min = samples.front();
  s.max = samples.back();
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  return s;
}

nlohmann::json summary_json(const Summary& s, const std::vector<double>& samples) {
  return {{"n", s.n}, {"median", s.median}, {"min", s.min}, {"max", s.max}, {"mean", s.mean}, {"values", samples}};
}

std::string format_number(double value) {
  if (!std::isfinite(value)) return "n/a";
  const double magnitude = std::fabs(value);
  if (magnitude >= 100 || magnitude == 0) return std::format("{:.0f}", value);
  if (magnitude >= 10) return std::format("{:.1f}", value);
  return std::format("{:.2f}", value);
}

std::string format_ms(double ms) { return ms < 0 ? "n/a" : format_number(ms) + " ms"; }

std::string format_summary(const Summary& s) {
  if (s.n == 0) return "n/a";
  if (s.n == 1) return format_number(s.median);
  return std::format("{} ({}–{})", format_number(s.median), format_number(s.min), format_number(s.max));
}

std::optional<double> ratio(double numerator, double denominator) {
  if (!(denominator > 0) || numerator < 0) return std::nullopt;
  return numerator / denominator;
}

std::string format_ratio(std::optional<double> r) { return r ? format_number(*r) + "×" : "n/a"; }

}  // namespace prefixd::bench
