// prefixd metrics — the one writer of Prometheus text: every /metrics family (the server's and the
// router's) is added through a Registry, which writes each family's HELP and TYPE once, keeps its
// samples together in the order they came, escapes label values, and writes a histogram's buckets,
// sum and count. A family added twice must agree on its type and help (a programming error
// otherwise: std::logic_error), so producers in different files can add samples to one family.
// Must not know: where the numbers come from.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prefixd::metrics {

enum class Type { counter, gauge, histogram };

// Label pairs of one sample, in the order written.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Cumulative bucket counts for `bounds` (ascending upper bounds; +Inf is added), with the total
// count and sum of the observations.
struct Histogram {
  std::span<const double> bounds;
  std::span<const std::int64_t> cumulative;  // same length as bounds
  std::int64_t count = 0;
  double sum = 0;
};

class Registry {
 public:
  void counter(std::string_view name, std::string_view help, double value, const Labels& labels = {});
  void gauge(std::string_view name, std::string_view help, double value, const Labels& labels = {});
  void histogram(std::string_view name, std::string_view help, const Histogram& histogram, const Labels& labels = {});
  // Declares a family without samples (its HELP and TYPE are still written): a labelled family
  // whose label values are not known yet (no tenant has made a request) stays discoverable.
  void declare(std::string_view name, Type type, std::string_view help);

  // The exposition text, families in the order they were first added.
  std::string text() const;

 private:
  struct Family {
    std::string name;
    Type type;
    std::string help;
    std::vector<std::string> samples;  // whole lines
  };
  Family& family(std::string_view name, Type type, std::string_view help);
  void sample(Family& family, std::string_view suffix, const Labels& labels, double value);

  std::vector<Family> families_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

// A number as Prometheus text writes it: integers without a fraction, NaN and infinities by name.
std::string format_value(double value);

}  // namespace prefixd::metrics
