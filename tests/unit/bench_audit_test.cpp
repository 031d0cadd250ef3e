// `prefixd-bench audit`'s statistics and decision rule: the Kolmogorov distribution against
// published values, the two-sample statistic on samples worked by hand (ties included), and the
// verdict from synthetic trials. No server.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bench/audit.h"
#include "bench/kolmogorov_smirnov.h"

namespace prefixd::bench {
namespace {

TEST(KolmogorovSmirnov, SurvivalMatchesKnownValues) {
  // P(K > lambda), as scipy.special.kolmogorov gives them, and the classic critical values
  // (1.358 for 5%, 1.628 for 1%, 1.949 for 0.1%).
  EXPECT_NEAR(kolmogorov_survival(0.5), 0.9639452436648751, 1e-13);
  EXPECT_NEAR(kolmogorov_survival(1.0), 0.26999967167735456, 1e-13);
  EXPECT_NEAR(kolmogorov_survival(2.0), 0.0006709252557796953, 1e-15);
  EXPECT_NEAR(kolmogorov_survival(0.3), 0.9999906941986655, 1e-13);
  EXPECT_NEAR(kolmogorov_survival(1.358), 0.050026797334447, 1e-12);
  EXPECT_NEAR(kolmogorov_survival(1.6276), 0.010001537333061, 1e-12);
  EXPECT_NEAR(kolmogorov_survival(1.9495), 0.000999801979026, 1e-13);
  EXPECT_NEAR(kolmogorov_survival(3.0), 3.045995948942526e-08, 1e-18);
}

TEST(KolmogorovSmirnov, SurvivalIsOneAtZeroAndFallsSmoothlyAcrossTheSeriesSwitch) {
  EXPECT_EQ(kolmogorov_survival(0), 1.0);
  EXPECT_EQ(kolmogorov_survival(-1), 1.0);
  EXPECT_NEAR(kolmogorov_survival(0.05), 1.0, 1e-15);
  EXPECT_EQ(kolmogorov_survival(40), 0.0);
  // Both series agree where one hands over to the other (1.18): no step in the p-value.
  EXPECT_NEAR(kolmogorov_survival(1.18 - 1e-12), kolmogorov_survival(1.18), 1e-11);
  EXPECT_NEAR(kolmogorov_survival(1.18), 0.1234538094297657, 1e-13);
  double previous = 1.0;
  for (double lambda = 0.01; lambda < 4; lambda += 0.01) {
    const double q = kolmogorov_survival(lambda);
    EXPECT_LE(q, previous) << lambda;
    previous = q;
  }
}

TEST(KolmogorovSmirnov, TwoSampleStatisticOnHandWorkedSamples) {
  const std::vector<double> low{1, 2, 3};
  const std::vector<double> high{4, 5, 6};
  const KsResult apart = two_sample_ks(low, high);
  EXPECT_DOUBLE_EQ(apart.d, 1.0);
  EXPECT_EQ(apart.n, 3u);
  EXPECT_EQ(apart.m, 3u);
  // sqrt(3·3 / 6) · 1
  EXPECT_NEAR(apart.p_value, 0.09956184831478034, 1e-13);

  const std::vector<double> odd{7, 1, 5, 3};
  const std::vector<double> even{2, 8, 4, 6};
  EXPECT_DOUBLE_EQ(two_sample_ks(odd, even).d, 0.25);  // order of the input does not matter
  EXPECT_DOUBLE_EQ(two_sample_ks(even, odd).d, 0.25);

  const KsResult same = two_sample_ks(low, low);
  EXPECT_EQ(same.d, 0.0);
  EXPECT_EQ(same.p_value, 1.0);

  // Unequal sizes: {1, 2} against {1.5, 3, 4, 5}: after 2, F_a = 1 and F_b = 1/4.
  EXPECT_DOUBLE_EQ(two_sample_ks(std::vector<double>{1, 2}, std::vector<double>{1.5, 3, 4, 5}).d, 0.75);
}

TEST(KolmogorovSmirnov, TiesStepBothFunctionsTogether) {
  // At 1: F_a = 2/3, F_b = 1/3; at 2 both are 1. Stepping one sample at a time would see 2/3 - 0.
  EXPECT_DOUBLE_EQ(two_sample_ks(std::vector<double>{1, 1, 2}, std::vector<double>{1, 2, 2}).d, 1.0 / 3.0);
  // Every value shared: no difference at all.
  EXPECT_EQ(two_sample_ks(std::vector<double>{5, 5, 5}, std::vector<double>{5, 5}).d, 0.0);
}

TEST(KolmogorovSmirnov, AnEmptySampleIsNoEvidence) {
  const KsResult none = two_sample_ks(std::vector<double>{}, std::vector<double>{1, 2});
  EXPECT_EQ(none.d, 0.0);
  EXPECT_EQ(none.p_value, 1.0);
}

TEST(KolmogorovSmirnov, TwentyAgainstTwentyFullySeparatedIsFarBelowTheAuditsAlpha) {
  std::vector<double> fast, slow;
  for (int i = 0; i < 20; ++i) {
    fast.push_back(10 + i * 0.1);
    slow.push_back(20 + i * 0.1);
  }
  const KsResult r = two_sample_ks(fast, slow);
  EXPECT_DOUBLE_EQ(r.d, 1.0);
  // sqrt(10) · 1 = 3.16: p ≈ 4e-9.
  EXPECT_LT(r.p_value, 1e-8);
  EXPECT_GT(r.p_value, 1e-9);
}

AuditProbe probe(double ttft_ms, std::int64_t cached) {
  return AuditProbe{.ttft_ms = ttft_ms, .prompt_tokens = 300, .cached_tokens = cached};
}

// `trials` trials with the same timings for both probes (interleaved, so the timing test sees no
// difference); the first `reused` report the primed probe's prompt as cached beyond the miss's
// scaffolding.
std::vector<AuditTrial> trials_with(int trials, int reused, std::int64_t scaffolding = 12) {
  std::vector<AuditTrial> out;
  for (int t = 0; t < trials; ++t) {
    AuditTrial trial;
    trial.primer = probe(50 + t, scaffolding);
    trial.primed = probe(50 + t, t < reused ? 299 : scaffolding);
    trial.miss = probe(50.5 + t, scaffolding);
    out.push_back(trial);
  }
  return out;
}

TEST(AuditVerdict, CachedTokensInTwoThirdsOfTheTrialsMeanShared) {
  const AuditVerdict all = decide_audit(trials_with(12, 12), 0.001);
  EXPECT_TRUE(all.shared);
  EXPECT_TRUE(all.by_cached_tokens);
  EXPECT_FALSE(all.by_timing);
  EXPECT_EQ(all.trials_primed_reused, 12);

  EXPECT_TRUE(decide_audit(trials_with(12, 8), 0.001).by_cached_tokens);
  const AuditVerdict fewer = decide_audit(trials_with(12, 7), 0.001);
  EXPECT_FALSE(fewer.by_cached_tokens);
  EXPECT_FALSE(fewer.shared);
  EXPECT_EQ(fewer.trials_primed_reused, 7);
}

TEST(AuditVerdict, ScaffoldingEveryProbeReportsIsNotSharing) {
  // A server that reports the chat template's opening tokens as cached on every request: primed and
  // miss report the same, so nothing counts.
  const AuditVerdict v = decide_audit(trials_with(16, 0, 40), 0.001);
  EXPECT_TRUE(v.cached_tokens_reported);
  EXPECT_EQ(v.trials_primed_reused, 0);
  EXPECT_FALSE(v.shared);
  EXPECT_GT(v.ks.p_value, 0.5);
}

TEST(AuditVerdict, AFewTokensBeyondTheMissProbeAreCoincidenceNotReuse) {
  // Random texts from one word list often share their first words with an earlier prompt of the
  // same key; a server that caches short prefixes reports those for whichever probe has them.
  std::vector<AuditTrial> trials = trials_with(12, 0, 4);
  for (AuditTrial& t : trials) t.primed.cached_tokens = 4 + 74;  // a quarter of 300 is 75
  EXPECT_EQ(decide_audit(trials, 0.001).trials_primed_reused, 0);
  EXPECT_FALSE(decide_audit(trials, 0.001).shared);
  for (AuditTrial& t : trials) t.primed.cached_tokens = 4 + 75;
  EXPECT_EQ(decide_audit(trials, 0.001).trials_primed_reused, 12);
  EXPECT_TRUE(decide_audit(trials, 0.001).shared);
}

TEST(AuditVerdict, ATimingDifferenceAloneMeansShared) {
  std::vector<AuditTrial> trials = trials_with(20, 0);
  for (AuditTrial& t : trials) t.primed.ttft_ms = t.miss.ttft_ms - 30;  // hits answer sooner
  // Without cached tokens the timing is all there is.
  for (AuditTrial& t : trials) t.primed.cached_tokens = t.miss.cached_tokens = -1;
  const AuditVerdict v = decide_audit(trials, 0.001);
  EXPECT_FALSE(v.cached_tokens_reported);
  EXPECT_FALSE(v.by_cached_tokens);
  EXPECT_TRUE(v.by_timing);
  EXPECT_TRUE(v.shared);
  EXPECT_LT(v.ks.p_value, 0.001);
  EXPECT_FALSE(decide_audit(trials, 1e-12).shared) << "alpha decides";
}

}  // namespace
}  // namespace prefixd::bench
