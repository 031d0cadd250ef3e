// prefixd cache — a running request's hold on the cache, from acquire() to donate() or release():
// its prompt, how far its sequence has computed it, and the device cells it shares with the tree.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/device_tier.h"

namespace prefixd::cache {

struct Lease {
  engine::SeqId seq = -1;
  std::uint64_t order = 0;    // registration order: a lease only ever waits for an older one
  RequestKey key;
  Lineage lineage;            // how its prompt's prefixes are addressed (PrefixCache::Impl::lineage_of)
  Reach reach;                // reach_of(key)
  std::string session;        // session_id(key)
  std::vector<engine::Token> prompt;
  std::int32_t computed = 0;  // positions [0, computed) of the prompt are in `seq`
  std::int32_t locked = 0;    // positions [0, locked) are the tree's cells, locked in the tree
  std::int32_t pinned = 0;    // the full window cache: positions [0, pinned) of `seq` are pinned (advance)
  std::optional<engine::SeqId> waits_for;
  std::int32_t wait_until = 0;
  std::vector<Digest> chain;          // checkpoint families: block chain of the prompt
  std::vector<engine::Pos> stops;     // checkpoint families: positions still to checkpoint, ascending
  engine::Pos branch = 0;             // checkpoint families: where the prompt leaves the longest prefix it shares
  engine::Pos window_from = 0;        // window-only models: where the sequence's unbroken window run starts
  // A reuse reaching past this position came from the shared tier (kNoFork: it gave nothing).
  std::int32_t remote_from = kNoFork;
};

// How much of `common` — the tokens `lease`'s prompt shares with `other`'s — `lease` may take from
// `other`'s cells: all of it within its own session, else no more than its reach.
inline std::int32_t shared_with(const Lease& lease, const Lease& other, std::int32_t common) {
  if (lease.reach.own && other.session == lease.session) return common;
  return std::min(common, lease.reach.others);
}

// A lease's cells [0, locked) are the tree's: locked there so that they are never given up.
inline void unlock(DeviceTier& device, Lease& lease) {
  if (lease.locked > 0) device.unlock(lease.lineage.ns, lease.prompt, lease.locked);
  lease.locked = 0;
}

inline void lock(DeviceTier& device, Lease& lease, std::int32_t length) {
  unlock(device, lease);
  if (length <= 0) return;
  device.lock(lease.lineage.ns, lease.prompt, length);
  lease.locked = length;
}

}  // namespace prefixd::cache
