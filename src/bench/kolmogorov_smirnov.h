// prefixd bench — the two-sample Kolmogorov–Smirnov test, for `prefixd-bench audit`: do two samples
// of times come from one distribution?
#pragma once

#include <cstddef>
#include <span>

namespace prefixd::bench {

// P(K > lambda) for the Kolmogorov distribution K, the limit of sqrt(n)·D for the one-sample
// statistic D (and of sqrt(nm/(n+m))·D for two samples): 1 at lambda <= 0, falling to 0.
// Accurate to about 1e-15 absolute everywhere (two series, each used where it converges fast).
double kolmogorov_survival(double lambda);

struct KsResult {
  double d = 0;        // the largest gap between the two empirical distribution functions, in [0, 1]
  double p_value = 1;  // asymptotic: kolmogorov_survival(sqrt(nm/(n+m)) · d)
  std::size_t n = 0;
  std::size_t m = 0;
};

// The two-sample test of `a` against `b`. Ties (equal values, within or across samples) are
// handled exactly: both distribution functions step past a value together. Either sample empty:
// d = 0 and p = 1 (no evidence). The order of the values does not matter.
KsResult two_sample_ks(std::span<const double> a, std::span<const double> b);

}  // namespace prefixd::bench
