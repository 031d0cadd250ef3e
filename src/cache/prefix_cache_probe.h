// prefixd cache — a look inside a PrefixCache for tests and benchmarks, which drive the cache
// directly and check its invariants (prefix_cache.h) after each operation. Not a face: nothing in
// the server uses it, so the cache's public header stays the faces alone. Defined beside the
// cache's own methods (prefix_cache.cpp), whose checks it shares.
//
// A probe only refers to its cache (cheap to make where it is used: PrefixCacheProbe(cache).verify())
// and must not outlive it. REQUIRES: the calls come from the one thread that owns the engine.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "cache/cache_types.h"
#include "cache/prefix_cache.h"
#include "engine/engine.h"

namespace prefixd::cache {

class PrefixCacheProbe {
 public:
  explicit PrefixCacheProbe(PrefixCache& cache) : cache_(cache) {}

  // admit()'s two steps on their own (request_life.h).
  // acquire(): step 3 without a shared-tier lookup — registers `seq` as running `prompt` and puts
  // the longest reusable prefix, at most prompt.size() - 1 tokens, into it; with `waiting` set,
  // `seq` stays empty until take_resolved() names it. REQUIRES: `seq` is empty and not registered.
  Acquisition acquire(const RequestKey& key, std::span<const engine::Token> prompt, engine::SeqId seq);
  // make_room(): step 2 — whether a prompt that needs `need` cells fits in the context beside the
  // cells the cache holds and `running` (Room::running); frees idle cells first when it would not.
  bool make_room(std::int64_t running, std::int64_t need);

  // Cells held by `seq` that the cache accounts (adopted from an entry and locked).
  std::int32_t locked_by(engine::SeqId seq) const;
  std::int64_t device_cells() const;  // cells the holders keep
  std::int64_t idle_cells() const;    // of which no running sequence uses: what could be freed
  // Idle cells that count against the device budget: all but those on the newest entry's path.
  std::int64_t budgeted_idle_cells() const;
  // Checks the cache's internal invariants (tree counts, locks, host LRU order: a segment is never
  // more recently used than the prefix it extends); returns what is violated, empty when none.
  std::string verify() const;
  // Blocks until the disk tier's write-behind queue is written (no-op without one).
  void flush_disk();

 private:
  PrefixCache& cache_;
};

}  // namespace prefixd::cache
