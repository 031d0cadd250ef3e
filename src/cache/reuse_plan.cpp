#include "cache/reuse_plan.h"

#include <algorithm>

namespace prefixd::cache {


std::int32_t outside_unbroken(std::span<const UnbrokenSpan> spans, std::int32_t length) {
  // The first span that ends after `length`: the only one that can hold it strictly inside.
  const auto it = std::ranges::upper_bound(spans, length, {}, &UnbrokenSpan::end);
  return it != spans.end() && it->begin < length ? it->begin : length;
}

std::optional<Offer> choose(std::span<const Source> order, std::span<const Offer> offers, std::int32_t min_prefix) {
  std::optional<Offer> best;
  // In the family's order, so that a later source must reach strictly further to win.
  for (const Source source : order) {
    for (const Offer& offer : offers) {
      if (offer.source != source || offer.reach < min_prefix) continue;
      if (!best || offer.reach > best->reach) best = offer;
    }
  }
  return best;
}

bool worth_waiting(std::int32_t common, std::int32_t computed, std::int32_t best_now, std::int32_t min_prefix) {
  return common > best_now && common >= min_prefix && common - best_now >= common - computed;
}

Tier credited_tier(std::int32_t reach, const Provenance& from) {
  if (reach <= 0) return Tier::none;
  if (reach <= from.device && !from.state_restored) return Tier::device;  // copied within the context
  if (reach > from.remote_from) return Tier::remote;
  if (from.state_from_disk || reach > std::max(from.host, from.device)) return Tier::disk;
  return reach > from.device ? Tier::host : Tier::device;
}

}  // namespace prefixd::cache
