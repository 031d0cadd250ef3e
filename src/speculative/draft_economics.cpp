#include "speculative/draft_economics.h"

#include <algorithm>

namespace prefixd::speculative {

void RowCosts::observe(std::int32_t rows, double seconds) {
  if (rows <= 0 || seconds <= 0) return;
  const auto blend = [](double& average, bool& has, double value) {
    average = has ? (1 - kWeight) * average + kWeight * value : value;
    has = true;
  };
  if (rows == 1) {
    blend(lone_, has_lone_, seconds);
    return;
  }
  bool rows_seen = has_multi_;
  blend(multi_rows_, rows_seen, rows);
  blend(multi_, has_multi_, seconds);
}

std::optional<double> RowCosts::call_seconds(std::int32_t rows) const {
  if (!has_lone_ || !has_multi_ || multi_rows_ <= 1) return std::nullopt;
  const double per_row = std::max(0.0, (multi_ - lone_) / (multi_rows_ - 1));
  return lone_ + per_row * std::max(0, rows - 1);
}

void DraftRecord::observe(std::int32_t drafted, std::int32_t accepted) {
  if (drafted <= 0) return;
  drafted_ += drafted;
  accepted_ += accepted;
  rejections_ += accepted < drafted ? 1 : 0;
}

double DraftRecord::acceptance(std::int32_t match) const {
  const double prior = static_cast<double>(match) / (match + 2.0);
  return (accepted_ + kPriorWeight * prior) / (accepted_ + rejections_ + kPriorWeight);
}

std::int32_t best_draft_length(const RowCosts& costs, double acceptance, std::int32_t other_rows, std::int32_t fewest,
                               std::int32_t most, double seconds_per_guess) {
  if (most < std::max(fewest, 1)) return 0;
  const std::int32_t base_rows = other_rows + 1;
  const std::optional<double> base = costs.call_seconds(base_rows);
  if (!base) return std::max(fewest, 1);
  const double p = std::clamp(acceptance, 0.0, 1.0);
  // A draft must promise a tenth more than none: the estimates are averages of noisy calls, and a
  // call of two rows or more costs a little more than the linear model says (its kernels change).
  constexpr double kMargin = 1.1;
  double best_rate = kMargin * base_rows / *base;
  std::int32_t best = 0;
  double expected = 1;  // tokens this request gets from a draft of k: 1 + p + ... + p^k
  double chance = 1;
  for (std::int32_t k = 1; k <= most; ++k) {
    chance *= p;
    expected += chance;
    if (k < fewest) continue;
    const double rate = (other_rows + expected) / (*costs.call_seconds(base_rows + k) + k * seconds_per_guess);
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

}  // namespace prefixd::speculative
