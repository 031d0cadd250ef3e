#include "scheduler/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace prefixd::scheduler {

GeneratedLogprobs logprobs_of(std::span<const float> logits, engine::Token chosen, std::int32_t top_n,
                              const engine::Vocabulary& vocab) {
  // log p(i) = l(i) - (max + log Σ exp(l(j) - max)); the shift keeps exp() in range.
  const float max = *std::ranges::max_element(logits);
  double sum = 0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l - max));
  const double log_z = static_cast<double>(max) + std::log(sum);
  const auto entry = [&](engine::Token id) {
    return TokenLogprob{id, vocab.piece(id, false),
                        static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_z)};
  };

  GeneratedLogprobs out;
  out.chosen = entry(chosen);
  const auto n = static_cast<size_t>(std::clamp<std::int32_t>(top_n, 0, static_cast<std::int32_t>(logits.size())));
  if (n == 0) return out;
  std::vector<engine::Token> ids(logits.size());
  std::iota(ids.begin(), ids.end(), engine::Token{0});
  const auto more_likely = [&](engine::Token a, engine::Token b) {
    const float la = logits[static_cast<size_t>(a)];
    const float lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), more_likely);
  out.top.reserve(n);
  for (size_t i = 0; i < n; ++i) out.top.push_back(entry(ids[i]));
  return out;
}

}  // namespace prefixd::scheduler
