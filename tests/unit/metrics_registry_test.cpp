// The Prometheus text writer: a family's HELP and TYPE once with its samples together, escaped
// label values, histograms with buckets, sum and count, and a family added twice with another type
// refused.
#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <stdexcept>

#include "metrics/registry.h"

namespace prefixd::metrics {
namespace {

TEST(MetricsRegistry, FamiliesKeepTheirSamplesTogetherWithOneHeader) {
  Registry r;
  r.counter("a_total", "Things.", 3, {{"kind", "x"}});
  r.gauge("b", "Level.", 0.5);
  r.counter("a_total", "Things.", 4, {{"kind", "y"}});
  EXPECT_EQ(r.text(),
            "# HELP a_total Things.\n# TYPE a_total counter\na_total{kind=\"x\"} 3\na_total{kind=\"y\"} 4\n"
            "# HELP b Level.\n# TYPE b gauge\nb 0.5\n");
}

TEST(MetricsRegistry, LabelValuesAndHelpAreEscaped) {
  Registry r;
  r.gauge("c", "Line one\nline \\two", 1, {{"tenant", "say \"hi\"\\\n"}});
  EXPECT_EQ(r.text(), "# HELP c Line one\\nline \\\\two\n# TYPE c gauge\nc{tenant=\"say \\\"hi\\\"\\\\\\n\"} 1\n");
}

TEST(MetricsRegistry, HistogramsWriteCumulativeBucketsSumAndCount) {
  Registry r;
  constexpr std::array<double, 2> bounds = {0.5, 2};
  constexpr std::array<std::int64_t, 2> cumulative = {1, 3};
  r.histogram("t_seconds", "Time.", {bounds, cumulative, 4, 7.25}, {{"outcome", "cold"}});
  EXPECT_EQ(r.text(),
            "# HELP t_seconds Time.\n# TYPE t_seconds histogram\n"
            "t_seconds_bucket{outcome=\"cold\",le=\"0.5\"} 1\nt_seconds_bucket{outcome=\"cold\",le=\"2\"} 3\n"
            "t_seconds_bucket{outcome=\"cold\",le=\"+Inf\"} 4\nt_seconds_sum{outcome=\"cold\"} 7.25\n"
            "t_seconds_count{outcome=\"cold\"} 4\n");
}

TEST(MetricsRegistry, DeclaredFamiliesWithoutSamplesKeepTheirHeader) {
  Registry r;
  r.declare("per_tenant_total", Type::counter, "By tenant.");
  EXPECT_EQ(r.text(), "# HELP per_tenant_total By tenant.\n# TYPE per_tenant_total counter\n");
}

TEST(MetricsRegistry, AFamilyAddedAgainMustAgreeAndNamesMustBeValid) {
  Registry r;
  r.counter("x_total", "X.", 1);
  EXPECT_THROW(r.gauge("x_total", "X.", 1), std::logic_error);
  EXPECT_THROW(r.counter("x_total", "Other help.", 1), std::logic_error);
  EXPECT_THROW(r.counter("bad-name", "X.", 1), std::logic_error);
  EXPECT_THROW(r.counter("y_total", "Y.", 1, {{"bad:label", "v"}}), std::logic_error);
}

TEST(MetricsRegistry, NumbersAreWrittenAsPrometheusReadsThem) {
  EXPECT_EQ(format_value(42), "42");
  EXPECT_EQ(format_value(-3), "-3");
  EXPECT_EQ(format_value(0.25), "0.25");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(4294967296.0), "4294967296");
}

}  // namespace
}  // namespace prefixd::metrics
