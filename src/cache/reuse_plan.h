// prefixd cache — the reuse planner's policy: how the offers of a family's sources (family.h,
// source.h) are ranked, when waiting for a running request pays, and which tier is credited for
// what was reused. Pure functions of numbers the sources report; the planner gathers the offers
// (ReusePlanner, reuse_planner.h) and has the chosen one adopted.
//
// Lookup order, stated once: every source reports how far it reaches for the prompt (less the
// one-token guard); the longest reach of at least min_prefix wins, and among equal reaches the
// source first in the family's list (Family::sources: the cheapest to adopt). A running request that will
// reach further than every offer is waited for when it has less left to compute than this request
// would compute without it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "cache/cache_types.h"
#include "cache/family.h"

namespace prefixd::cache {

struct Offer {
  Source source = Source::device;
  std::int32_t reach = 0;  // the prompt's positions [0, reach) it gives
};

// The longest offer of at least `min_prefix` tokens from the sources in `order` (a family's,
// Family::sources); ties go to the source listed first. nullopt: nothing worth adopting (the
// request computes from 0).
std::optional<Offer> choose(std::span<const Source> order, std::span<const Offer> offers, std::int32_t min_prefix);

// Whether to wait for a running request that shares `common` tokens with the prompt and has
// computed `computed` of them, when the best offer now reaches `best_now`: when it reaches further
// and has less left to compute before the hand-over than this request would compute without it
// (its remaining work runs anyway).
bool worth_waiting(std::int32_t common, std::int32_t computed, std::int32_t best_now, std::int32_t min_prefix);

// Where a reused prefix came from, position by position.
struct Provenance {
  std::int32_t device = 0;        // [0, device): cells of a device entry or a running request
  std::int32_t host = 0;          // how far the host tier's own segments reached (before disk promotion)
  bool state_restored = false;    // checkpoint families: a saved state replaced the cells' own
  bool state_from_disk = false;   // ... and it was read from disk for this request
  std::int32_t remote_from = kNoFork;  // past this, values fetched from the shared tier served
};

// The tier credited for a reuse of `reach` tokens: the deepest one that served part of it.
Tier credited_tier(std::int32_t reach, const Provenance& from);

}  // namespace prefixd::cache
