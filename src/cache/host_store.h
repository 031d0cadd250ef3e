// prefixd cache — the host tier: serialized K/V segments in RAM, addressed by chain hash.
//
// A segment is the state of positions [begin, begin + tokens) of one prefix, saved with the
// engine's sequence-state I/O, with the token ids it holds. Its parent is the block-chain hash of
// everything before `begin` (the namespace root at 0); its key is a hash of the parent and its own
// tokens, so a segment exists once however many conversations share it, and two segments with the
// same parent hold K/V of the same context and may be compared token by token. Lookups touch
// deeper segments first so that, in LRU order, a child segment is older than its parent: eviction
// removes leaves before the prefixes they depend on.
// Invariant: bytes() <= capacity after every insert returns (one segment may be in flight).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/block_hash.h"
#include "cache/cache_types.h"
#include "cache/changed_keys.h"
#include "cache/scope.h"
#include "cache/segment_index.h"
#include "engine/types.h"

namespace prefixd::cache {

struct HostSegment {
  engine::Pos begin = 0;
  std::int32_t tokens = 0;
  Digest parent{};
  std::vector<engine::Token> token_ids;  // tokens.size() == tokens
  engine::Bytes state;
  std::chrono::steady_clock::time_point last_used;
  ScopeId scope{};  // whose prefix this is (counted per scope, removed with it)
  // The first prompt_tokens of token_ids were a request's prompt, the rest its reply; -1: all prompt.
  std::int32_t prompt_tokens = -1;
};

enum class EvictReason { lru, ttl, capacity };

class HostStore final : public SegmentIndex {
 public:
  struct Evicted {
    std::int64_t lru = 0, ttl = 0, capacity = 0;
    std::int64_t total() const { return lru + ttl + capacity; }
  };

  HostStore(std::uint64_t capacity_bytes, std::int64_t max_segments);

  bool contains(const Digest& key) const { return segments_.contains(key); }
  // Keys of the segments whose parent is `parent` and whose first token is `first`: a lookup
  // compares only the branches that can match, however many conversations share the parent.
  std::vector<Digest> children(const Digest& parent, engine::Token first) const override;
  std::optional<Compared> compare(const Digest& key, std::span<const engine::Token> rest) const override;
  // (parent, key) of every segment (for rare operations that walk the store by parent).
  std::vector<std::pair<Digest, Digest>> parent_links() const;
  const HostSegment* peek(const Digest& key) const;  // does not count as a use
  // Marks the segment used now and returns it (nullptr if absent).
  const HostSegment* touch(const Digest& key);
  // Stores a segment, evicting least recently used ones to stay in budget. Returns false, storing
  // nothing, when the segment is larger than the whole budget or making room would evict one of
  // `keep` (the prefix the new segment extends: without it the segment could never be used).
  bool insert(const Digest& key, HostSegment segment, Evicted& evicted, std::span<const Digest> keep = {});
  void expire(std::chrono::steady_clock::time_point older_than, Evicted& evicted);
  void erase(const Digest& key);
  std::int64_t clear();  // returns bytes freed
  // Erases every segment of `scope`; returns what it held.
  ScopeUsage clear_scope(const ScopeId& scope);
  const UsageByScope& usage_by_scope() const { return by_scope_; }

  // Called with each segment evicted (not with erased ones) before it is freed: the disk tier
  // keeps what leaves RAM.
  using Spill = std::function<void(const Digest& key, const HostSegment& segment)>;
  void set_spill(Spill spill) { spill_ = std::move(spill); }
  // Segments a live retention needs (retention.h): eviction passes over them while any other
  // segment can go, and the TTL does not end them.
  using Retained = std::function<bool(const Digest& key)>;
  void set_retained(Retained retained) { retained_ = std::move(retained); }

  // The keys inserted or removed since the last call (ChangedKeys::take; nullopt: walk the store).
  std::optional<std::vector<Digest>> take_changed() { return changed_.take(std::max<std::size_t>(4096, 2 * size())); }

  std::uint64_t bytes() const { return bytes_; }
  std::int64_t tokens() const { return tokens_; }  // sum of the segments' lengths
  std::size_t size() const { return segments_.size(); }
  // Its holdings for a stats snapshot; the budgets as configured and the counters of evictions and
  // failed restores are the coordinator's to add (prefix_cache_stats.cpp).
  HostTierStats stats() const { return HostTierStats{.entries = static_cast<std::int64_t>(size()), .bytes = bytes()}; }
  std::uint64_t capacity() const { return capacity_bytes_; }
  // "" when every segment whose parent segment is stored is less recently used than that parent.
  std::string verify_lru_order() const;

 private:
  using Lru = std::list<Digest>;  // front: most recently used
  struct Slot {
    HostSegment segment;
    Lru::iterator lru;
  };
  // The least recently used segment no retention needs; the least recently used of all when
  // every one is retained. REQUIRES: the store is not empty.
  const Digest& victim() const;
  void evict_one(EvictReason reason, Evicted& evicted);

  std::uint64_t capacity_bytes_;
  std::int64_t max_segments_;
  std::uint64_t bytes_ = 0;
  std::int64_t tokens_ = 0;
  Lru lru_;
  struct Branch {
    Digest parent;
    engine::Token first;
    bool operator==(const Branch&) const = default;
  };
  struct BranchHash {
    std::size_t operator()(const Branch& b) const noexcept {
      return DigestHash{}(b.parent) ^ (static_cast<std::size_t>(static_cast<std::uint32_t>(b.first)) * 0x9e3779b97f4a7c15ull);
    }
  };
  static Branch branch_of(const HostSegment& segment) { return {segment.parent, segment.token_ids.front()}; }

  Spill spill_;
  ChangedKeys changed_;

  Retained retained_;
  std::unordered_map<Digest, Slot, DigestHash> segments_;
  UsageByScope by_scope_;
  std::unordered_multimap<Branch, Digest, BranchHash> by_branch_;  // (parent, first token) -> key
};

}  // namespace prefixd::cache
