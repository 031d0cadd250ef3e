// prefixd cache — the host tier: serialized K/V segments in RAM, addressed by chain hash.
//
// A segment is the state of positions [begin, begin + tokens) of one prefix, saved with the
// engine's sequence-state I/O. Its key is the block-chain hash at its end, so a segment exists
// once however many conversations share it. Lookups touch deeper segments first so that, in LRU
// order, a child segment is always older than its parent: eviction removes leaves before the
// prefixes they depend on.
// Invariant: bytes() <= capacity after every insert returns (one segment may be in flight).
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>

#include "cache/block_hash.h"
#include "engine/types.h"

namespace prefixd::cache {

struct HostSegment {
  engine::Pos begin = 0;
  std::int32_t tokens = 0;
  engine::Bytes state;
  std::chrono::steady_clock::time_point last_used;
};

enum class EvictReason { lru, ttl, capacity };

class HostStore {
 public:
  struct Evicted {
    std::int64_t lru = 0, ttl = 0, capacity = 0;
    std::int64_t total() const { return lru + ttl + capacity; }
  };

  HostStore(std::uint64_t capacity_bytes, std::int64_t max_segments);

  bool contains(const Digest& key) const { return segments_.contains(key); }
  // Marks the segment used now and returns it (nullptr if absent).
  const HostSegment* touch(const Digest& key);
  // Stores a segment, evicting least recently used ones to stay in budget. A segment larger than
  // the whole budget is not stored (returns false).
  bool insert(const Digest& key, HostSegment segment, Evicted& evicted);
  void expire(std::chrono::steady_clock::time_point older_than, Evicted& evicted);
  void erase(const Digest& key);
  std::int64_t clear();  // returns bytes freed

  std::uint64_t bytes() const { return bytes_; }
  std::size_t size() const { return segments_.size(); }
  std::uint64_t capacity() const { return capacity_bytes_; }

 private:
  using Lru = std::list<Digest>;  // front: most recently used
  struct Slot {
    HostSegment segment;
    Lru::iterator lru;
  };
  void evict_one(EvictReason reason, Evicted& evicted);

  std::uint64_t capacity_bytes_;
  std::int64_t max_segments_;
  std::uint64_t bytes_ = 0;
  Lru lru_;
  std::unordered_map<Digest, Slot, DigestHash> segments_;
};

}  // namespace prefixd::cache
