// prefixd cache — the host tier's policy: how a device entry is cut into segments when it is
// demoted, and how the longest prefix of a prompt is found and rebuilt from segments.
//
// Segments lie on a grid of `host_segment_tokens` from position 0 and are keyed by the block-chain
// hash at their end, so whole ones are found by walking the query's chain. What lies past the last
// grid line of a demoted entry becomes one shorter tail segment keyed by its parent and tokens.
// Where the walk stops, every segment hanging off the same parent is compared token by token, so
// a restore is token-exact. LRU order: a restore or a save touches deeper segments before
// shallower ones, so a segment is always older than the prefix it extends and eviction removes
// leaves first.
// In a forked lineage (session isolation) a segment that covers the fork hangs off a forked parent
// (BlockHasher::parent): the walk and the token comparison at its end only ever meet segments of
// the same salt past the fork, and segments wholly before it are the namespace's, shared.
// A fork off the grid (a session wall inside a grid segment) also gets a wall segment: the part of
// that grid segment before the fork, a short segment like a tail, under the unforked parent, so
// every session of the namespace rebuilds the whole shared prefix. Where the walk stops before the
// fork, the comparison also meets the unforked segments there, capped at the fork.
// REQUIRES: used from the engine thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/block_hash.h"
#include "cache/host_store.h"
#include "engine/engine.h"

namespace prefixd::cache {

class HostTier {
 public:
  // The segments that rebuild the longest prefix of a query, in position order; of the last one
  // only its first `last_take` tokens are used.
  struct Plan {
    std::vector<Digest> keys;
    std::int32_t start = 0;      // position of the first key's segment
    std::int32_t last_take = 0;
    std::int32_t length = 0;     // positions [0, length) are covered (with the device's part)
    std::vector<Digest> ancestors;  // stored grid segments before `start`, nearest first
  };

  HostTier(engine::Engine& engine, const BlockHasher& hasher, std::int32_t segment_tokens,
           std::uint64_t capacity_bytes, std::int64_t max_segments, engine::SeqId scratch);

  // `on_device`: positions [0, on_device) of the query are available from the device tier, so the
  // walk starts at the last grid line at or before it instead of at the root (walk_path, the
  // host tier alone).
  Plan plan(const Lineage& lineage, std::span<const engine::Token> query, std::int32_t on_device = 0) const;
  // The plan cut to positions [0, length): later segments dropped, the last one taken in part.
  Plan clip(const Plan& plan, std::int32_t length) const;
  // Rebuilds the plan's prefix in `dst`, which already holds positions [0, from) (cells of the
  // device tier); only positions from `from` on are restored. Returns the positions `dst` holds
  // afterwards (>= from). A segment that cannot be restored is dropped, counted in `failed`, and
  // ends the walk.
  // The pin `keep_with` (>= 0) co-owns every restored cell from the moment it lands (cell_pin.h).
  std::int32_t restore(const Plan& plan, engine::SeqId dst, std::int32_t from, std::int64_t& failed,
                       engine::SeqId keep_with = -1);
  // Stores positions [from, tokens.size()) of `holder` as grid segments plus a tail (the segment
  // containing `from` whole), and the wall segment when that lies among them. Segments the tier holds already are only touched. Returns false when
  // nothing could be stored. A segment holds attention K/V only: the partial state a copy of the
  // holder brings along (recurrent state, window cells) is dropped first — it stands for the
  // holder's end, and is kept once, as a checkpoint.
  // New segments belong to `scope`. Positions [0, prompt_length) of `tokens` were a request's
  // prompt and the rest its reply (-1: all prompt): a tail an earlier turn left whose prompt the
  // new segment covers but whose reply it does not continue is dropped (drop_covered_siblings).
  bool save(const Lineage& lineage, std::span<const engine::Token> tokens, std::int32_t from, engine::SeqId holder,
            HostStore::Evicted& evicted, const ScopeId& scope, std::int32_t prompt_length = -1);

  // One segment of a prefix on the tier's grid: positions [begin, stop), keyed like the stored
  // segments (a whole grid segment by the chain hash at its end, a tail by its parent and tokens).
  struct Cut {
    engine::Pos begin = 0, stop = 0;
    Digest parent{}, key{};
  };
  // The segments that cover positions [from, tokens.size()) (the one containing `from` whole).
  std::vector<Cut> cuts(const Lineage& lineage, std::span<const engine::Token> tokens, std::int32_t from) const;
  // The same, given `tokens`' chain in `lineage`.
  std::vector<Cut> cuts(const Lineage& lineage, std::span<const engine::Token> tokens, std::span<const Digest> chain,
                        std::int32_t from) const;
  // The wall segment of `tokens`: positions [g, fork) under the unforked parent, where g is the
  // grid line before a fork that lies inside a grid segment and before the end of `tokens`.
  // nullopt when the fork is on the grid or not before the end (the cuts are unforked up to it).
  std::optional<Cut> wall_cut(const Lineage& lineage, std::span<const engine::Token> tokens) const;
  // The attention K/V of positions [begin, stop) of `holder`, serialized (empty on failure).
  engine::Bytes serialize(engine::SeqId holder, engine::Pos begin, engine::Pos stop);
  // Inserts a segment read from elsewhere (the disk tier), keeping `keep` (the prefix it extends).
  bool adopt(const Digest& key, HostSegment segment, HostStore::Evicted& evicted, std::span<const Digest> keep);
  std::int32_t segment_tokens() const { return segment_tokens_; }

  HostStore& store() { return store_; }
  const HostStore& store() const { return store_; }

 private:
  void drop_covered_siblings(const Digest& key, const Digest& parent, std::span<const engine::Token> tokens);

  engine::Engine& engine_;
  const BlockHasher& hasher_;
  std::int32_t segment_tokens_;  // a multiple of the block size
  engine::SeqId scratch_;
  HostStore store_;
};

}  // namespace prefixd::cache
