// prefixd bench — small statistics and number formatting for the benchmark's tables.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

// Median, min and max of one arm's samples; the median of an even count is the mean of the two
// middle values. Empty input gives n = 0 and zeros, which the formatters print as "n/a".
struct Summary {
  std::size_t n = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
};

Summary summarize(std::vector<double> samples);
nlohmann::json summary_json(const Summary& s, const std::vector<double>& samples);

// "0.42", "12.3", "1234": three significant digits or so, enough for timings in ms.
std::string format_number(double value);
// "12.3 ms"; "n/a" for a negative value (unmeasured).
std::string format_ms(double ms);
// "12.3 (10.1–15.0)": median with the range.
std::string format_summary(const Summary& s);
// numerator / denominator, or nothing when the denominator is not positive.
std::optional<double> ratio(double numerator, double denominator);
// "123×", "1.5×", or "n/a".
std::string format_ratio(std::optional<double> r);

}  // namespace prefixd::bench
