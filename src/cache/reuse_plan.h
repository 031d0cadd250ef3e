// prefixd cache — the reuse planner's policy: which sources a model family can resume from, how
// the offers of those sources are ranked, when waiting for a running request pays, and which tier
// is credited for what was reused. Pure functions of numbers the tiers report; the cache gathers
// the offers (ReusePlanner, reuse_planner.h) and carries out the one chosen.
//
// Lookup order, stated once: every source reports how far it reaches for the prompt (less the
// one-token guard); the longest reach of at least min_prefix wins, and among equal reaches the
// source first in the family's list below (the cheapest to adopt). A running request that will
// reach further than every offer is waited for when it has less left to compute than this request
// would compute without it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "cache/block_hash.h"
#include "cache/prefix_cache.h"

namespace prefixd::cache {

// A place a prefix can be resumed from.
enum class Source : std::uint8_t {
  // Trim families (the memory can be cut back to any position: dense, and sliding-window models
  // with the full window cache): any prefix of cells.
  device,   // a device entry's cells (a copy within the context)
  running,  // the cells another running request has computed (a copy within the context)
  host,     // host-tier segments, after disk and shared-tier values were promoted into it (a restore)
  // Checkpoint families (recurrent, hybrid, window-only sliding-window): an exact state only.
  entry_state,  // a device entry whose holder keeps the state after exactly its tokens
  checkpoint,   // a saved state, with the attention cells before it from device, running or host
  window,       // window-only models: a device entry whose window before the match is unbroken
};

// The sources a family resumes from, in the order that breaks ties (cheapest first). The one
// place the families differ in how a prefix is found; everything else is shared.
std::span<const Source> resumable_sources(ReuseMode mode);

struct Offer {
  Source source = Source::device;
  std::int32_t reach = 0;  // the prompt's positions [0, reach) it gives
};

// The longest offer of at least `min_prefix` tokens among the family's sources; ties go to the
// source listed first. nullopt: nothing worth adopting (the request computes from 0).
std::optional<Offer> choose(ReuseMode mode, std::span<const Offer> offers, std::int32_t min_prefix);

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
