#include "bench/kolmogorov_smirnov.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace prefixd::bench {

double kolmogorov_survival(double lambda) {
  if (!(lambda > 0)) return 1.0;
  // Below about 1.18 the alternating series 2 Σ (-1)^(j-1) exp(-2 j² λ²) needs many terms, and the
  // Jacobi theta form of the distribution function converges in a few; above it the alternating
  // series does, and it gives the small tail without the cancellation of 1 - (almost 1).
  constexpr double kSwitch = 1.18;
  constexpr int kTerms = 100;  // either series is below 1e-300 long before this
  double sum = 0;
  if (lambda < kSwitch) {
    const double x = -std::numbers::pi * std::numbers::pi / (8.0 * lambda * lambda);
    for (int j = 1; j <= kTerms; ++j) {
      const double odd = 2.0 * j - 1.0;
      const double term = std::exp(odd * odd * x);
      sum += term;
      if (term < 1e-17 * sum) break;
    }
    return std::clamp(1.0 - std::sqrt(2.0 * std::numbers::pi) / lambda * sum, 0.0, 1.0);
  }
  double sign = 1;
  for (int j = 1; j <= kTerms; ++j) {
    const double term = std::exp(-2.0 * j * j * lambda * lambda);
    sum += sign * term;
    if (term < 1e-17 * std::fabs(sum)) break;
    sign = -sign;
  }
  return std::clamp(2.0 * sum, 0.0, 1.0);
}

KsResult two_sample_ks(std::span<const double> a, std::span<const double> b) {
  KsResult result{.n = a.size(), .m = b.size()};
  if (a.empty() || b.empty()) return result;
  std::vector<double> x(a.begin(), a.end());
  std::vector<double> y(b.begin(), b.end());
  std::ranges::sort(x);
  std::ranges::sort(y);
  const double n = static_cast<double>(x.size());
  const double m = static_cast<double>(y.size());
  // Walk the merged order one distinct value at a time, stepping both functions past it.
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < x.size() && j < y.size()) {
    const double value = std::min(x[i], y[j]);
    while (i < x.size() && x[i] == value) ++i;
    while (j < y.size() && y[j] == value) ++j;
    result.d = std::max(result.d, std::fabs(static_cast<double>(i) / n - static_cast<double>(j) / m));
  }
  // Past the end of one sample its function is 1; the other's only climbs towards 1 from here, so
  // the gap right here (already counted) is the largest that remains.
  const double effective = n * m / (n + m);
  result.p_value = kolmogorov_survival(std::sqrt(effective) * result.d);
  return result;
}

}  // namespace prefixd::bench
