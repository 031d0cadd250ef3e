#include "engine/types.h"

#include <algorithm>

namespace prefixd::engine {

const char* family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::dense: return "dense";
    case ModelFamily::sliding_window: return "sliding_window";
    case ModelFamily::recurrent: return "recurrent";
    case ModelFamily::hybrid: return "hybrid";
  }
  return "unknown";
}

const char* pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::model: return "model";
    case Pooling::none: return "none";
    case Pooling::mean: return "mean";
    case Pooling::cls: return "cls";
    case Pooling::last: return "last";
    case Pooling::rank: return "rank";
  }
  return "unknown";
}

std::optional<Pooling> parse_pooling(std::string_view name) {
  for (const Pooling p : {Pooling::model, Pooling::none, Pooling::mean, Pooling::cls, Pooling::last, Pooling::rank}) {
    if (name == pooling_name(p)) return p;
  }
  return std::nullopt;
}

ContextFit fit_context_size(const ModelInfo& info, std::uint64_t kv_memory_budget) {
  constexpr std::int32_t kMaxContext = 1 << 22;
  const std::int32_t wanted = info.n_ctx_train > 0 ? std::min(info.n_ctx_train, kMaxContext) : kFallbackContextSize;
  const std::uint64_t per_token = info.kv_bytes_per_token;
  if (per_token == 0 || per_token * static_cast<std::uint64_t>(wanted) <= kv_memory_budget) return {wanted, false};
  const std::uint64_t fits = kv_memory_budget / per_token / 256 * 256;
  const auto n_ctx = static_cast<std::int32_t>(std::max<std::uint64_t>(fits, kMinFittedContextSize));
  return {std::min(n_ctx, wanted), true};
}

}  // namespace prefixd::engine
