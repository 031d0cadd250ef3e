// prefixd cache — the owner's face of the prompt cache: what whoever owns a PrefixCache (the
// scheduler, a draft model) does with it beside a request's life (request_life.h) and the admin
// face's questions (cache_admin.h): read its resolved configuration and its stats, reset it, and
// wire up its KV events. PrefixCache implements it (prefix_cache.h).
//
// A face of its own rather than more of CacheAdmin: the scheduler hands the admin face to anyone
// who asks (Scheduler::ask_cache) and the answers change nothing the scheduler tracks, whereas a
// reset must go with the owner's own bookkeeping (what its slots and sessions kept, its drafts),
// the KV-event stream has one consumer that the owner sets up, and stats() is the one call that
// any thread may make. So the owner keeps this face to itself.
//
// REQUIRES: every call but stats() is made from the one thread that owns the engine.
#pragma once

#include <vector>

#include "cache/cache_types.h"
#include "cache/kv_events.h"

namespace prefixd::cache {

class CacheOperations {
 public:
  // The configuration with every default resolved for the engine; fixed for the cache's life.
  virtual const CacheConfig& config() const = 0;
  virtual ReuseMode reuse_mode() const = 0;

  // Thread-safe: a snapshot published after every mutating call, with the disk and shared tiers'
  // own counters read as it is taken.
  virtual CacheStats stats() const = 0;

  // Empties every tier; running sequences keep their cells.
  virtual ResetReport reset() = 0;
  // Removes every entry of `scope` from every tier (device, host, checkpoints, disk); other
  // scopes' entries and running sequences' cells stay.
  virtual ResetReport reset_scope(const ScopeId& scope) = 0;

  // KV events (kv_events.h): from now on the changes of the blocks of the scopes `scopes` accepts
  // are recorded, starting with everything held now; an empty function stops recording.
  // take_kv_events() looks at the tiers and returns what changed since its last call. A reset()
  // is one AllBlocksCleared.
  virtual void record_kv_events(KvEventScopes scopes) = 0;
  virtual std::vector<KvEvent> take_kv_events() = 0;

 protected:
  ~CacheOperations() = default;
};

}  // namespace prefixd::cache
