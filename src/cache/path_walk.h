// prefixd cache — the one walk along a token sequence's path through the tiers that keep attention
// segments: which record rebuilds each piece of the longest prefix they hold, on the host tier's
// grid. Every question of the form "how far can the tiers rebuild this prefix, and from what"
// asks it: a restore's plan (HostTier::plan, BackingTiers::plan_restore), what a key holds and the
// artifact that carries it (KeyPaths::rebuildable).
//
// The walk goes grid segment by grid segment (HostTier::cuts). A segment a tier holds whole is
// taken from it; where none does, the path ends with the longest part any tier holds of the rest:
// the stored segment beginning there that shares the most tokens with it (best_tail, which carries
// the session fork's one rule: a namespace's segments are taken up to the fork, never past it),
// or the device's cells. So what a key is said to hold is exactly what a restore reaches.
// The walk reads indexes only: nothing is read from disk and no tier changes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cache/host_tier.h"
#include "cache/segment_index.h"

namespace prefixd::cache {

// Where a piece of a path is read from.
enum class PieceFrom { device, host, disk };

struct PathPiece {
  HostTier::Cut cut;  // the positions it gives, keyed as a record of exactly those tokens
  PieceFrom from = PieceFrom::device;
  Digest stored{};    // host, disk: the key it is stored under (cut.key when whole)
  bool part = false;  // host, disk: the stored segment goes on past cut.stop; only its start is taken
  std::int32_t length() const { return cut.stop - cut.begin; }
};

struct PathWalk {
  std::vector<PathPiece> pieces;  // in position order; they tile [start, reach())
  std::int32_t start = 0;
  std::vector<Digest> chain;      // the tokens' block chain in the walk's lineage
  std::int32_t reach() const { return pieces.empty() ? start : pieces.back().cut.stop; }
};

// What a walk may take pieces from.
struct WalkTiers {
  std::int32_t device = 0;              // the device's cells hold positions [0, device)
  const SegmentIndex* host = nullptr;   // null: the host tier is not searched
  const SegmentIndex* disk = nullptr;   // null: the disk is not searched
  // A restore's walk: the device's part is copied from its cells before anything is restored, so
  // the walk starts at the grid line at or before `device` (the segment holding position device,
  // whole) and takes no piece from the device. Otherwise it starts at position 0, and a grid
  // segment is taken from the host, the device's cells or the disk, in that order.
  bool after_device_part = false;
};

PathWalk walk_path(const HostTier& grid, const BlockHasher& hasher, const WalkTiers& tiers, const Lineage& lineage,
                   std::span<const engine::Token> tokens);

// A restore's walk as the host tier's plan: its leading host pieces, and the stored grid segments
// before its start (the device's part) as the plan's ancestors. An empty plan when the host store
// is empty.
HostTier::Plan as_host_plan(const HostTier& host, const BlockHasher& hasher, const PathWalk& walk);

}  // namespace prefixd::cache
