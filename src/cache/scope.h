// prefixd cache — scopes: whose an entry is, for the counters and the resets that concern one
// owner alone.
//
// The cache never decides who may share K/V by scope (the namespace digest does that); a scope only
// attributes. Every request names one, every entry it leaves in any tier (device entry, host
// segment, checkpoint, disk file) carries it, and each tier counts its entries and bytes per scope
// as they come and go, so what is reported per scope is counted, never estimated. A namespace
// belongs to exactly one scope (the API derives both from the same tenant), so content-addressed
// records never have two owners.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>

#include "cache/block_hash.h"

namespace prefixd::cache {

using ScopeId = Digest;

// BLAKE3 over a domain separator and `name` (a tenant id): stable across restarts, so disk files
// keep their owner.
ScopeId scope_id(std::string_view name);

// What one scope holds in one store.
struct ScopeUsage {
  std::int64_t entries = 0;
  std::uint64_t bytes = 0;
  std::int64_t tokens = 0;  // segments: the positions they hold; checkpoints: 0

  void add(std::uint64_t entry_bytes, std::int64_t entry_tokens) {
    entries += 1;
    bytes += entry_bytes;
    tokens += entry_tokens;
  }
  void remove(std::uint64_t entry_bytes, std::int64_t entry_tokens) {
    entries -= 1;
    bytes -= entry_bytes;
    tokens -= entry_tokens;
  }
};

// Usage per scope; scopes that hold nothing are erased (see settle()).
using UsageByScope = std::map<ScopeId, ScopeUsage>;
inline void settle(UsageByScope& usage, const ScopeId& scope) {
  if (auto it = usage.find(scope); it != usage.end() && it->second.entries == 0) usage.erase(it);
}

}  // namespace prefixd::cache
