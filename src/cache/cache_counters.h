// prefixd cache — the counters a request's life moves, in total and per scope. The rest of a
// stats snapshot (sizes, budgets) is derived from the tiers when it is published. `totals` is a
// CacheStats of which only counters are moved here: the requests' (RequestStats), and those of the
// device and host tiers that the coordinator moves as it demotes, evicts, compacts and restores.
#pragma once

#include <map>

#include "cache/host_store.h"
#include "cache/cache_types.h"

namespace prefixd::cache {

struct CacheCounters {
  CacheStats totals;
  std::map<ScopeId, ScopeStats> scopes;  // the counter fields of each scope's stats

  // An outcome, once, when it is final.
  void count_outcome(const Acquisition& got, const ScopeId& scope, std::int64_t prompt_tokens) {
    ScopeStats& scoped = scopes[scope];
    totals.requests.outcomes[static_cast<size_t>(got.outcome)] += 1;
    scoped.outcomes[static_cast<size_t>(got.outcome)] += 1;
    if (got.outcome == Outcome::bypass) return;
    totals.requests.prompt_tokens += prompt_tokens;
    scoped.prompt_tokens += prompt_tokens;
    if (got.tier == Tier::disk) {
      totals.disk.hits += 1;
      scoped.disk_hits += 1;
    }
    if (got.tier == Tier::remote) scoped.remote_hits += 1;
    if (got.shifted > 0) {
      totals.requests.tokens_shifted += got.shifted;
      totals.requests.shifted_requests += 1;
    }
    const std::int32_t exact = got.reused - got.shifted;
    if (exact > 0) {
      totals.requests.hits += 1;
      totals.requests.tokens_reused += exact;
      totals.requests.tokens_reused_by_tier[static_cast<size_t>(got.tier)] += exact;
      scoped.hits += 1;
      scoped.tokens_reused += exact;
    } else {
      totals.requests.misses += 1;
      scoped.misses += 1;
    }
  }

  void count_evictions(const HostStore::Evicted& evicted) {
    totals.host.evictions_lru += evicted.lru;
    totals.host.evictions_ttl += evicted.ttl;
    totals.host.evictions_capacity += evicted.capacity;
  }

  // A request took cells another running request computed.
  void count_inflight_share(const ScopeId& scope) {
    totals.requests.inflight_shares += 1;
    scopes[scope].inflight_shares += 1;
  }
};

}  // namespace prefixd::cache
