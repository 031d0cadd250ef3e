// prefixd cache — the device tier's budget: which entries leave the context, and how. An entry is
// demoted — its K/V to the host tier, its end state (checkpoint families) to the checkpoint
// store, then the cells nobody else uses given up — when a prompt needs cells, when idle cells
// exceed the budget, or when a new entry needs a holder; an entry unused for the TTL is cut back.
// Least recently used first, and only what frees a cell.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cache/backing_tiers.h"
#include "cache/cache_counters.h"
#include "cache/device_tier.h"
#include "cache/host_tier.h"
#include "cache/tiers.h"

namespace prefixd::cache {

class DeviceBudget {
 public:
  // `repin`: called with a namespace whose tree lost cells, so that running sequences of it
  // re-share what the tree still holds (PrefixCache::Impl::repin).
  DeviceBudget(const Tiers& tiers, CacheCounters& counters, std::function<void(const std::string&)> repin);

  // While a request runs the newest entry has no exemption: idle cells above the budget would make
  // every token it computes attend over them (on the CPU, budget 0: llama-server's single slot
  // likewise keeps its previous prompt only when the next one extends it).
  void enforce_running();
  // Between requests: idle cells within the budget, not counting the newest entry's own.
  void enforce_idle();
  // Demotes least recently used entries until `cells` cells are freed or nothing idle is left;
  // returns the cells freed.
  std::int64_t release(std::int64_t cells);
  // Frees a holder for a new entry of `ns` by demoting the least recently used entry that can be
  // dropped whole (nothing it holds is locked, or another entry holds it too).
  bool free_a_holder(const std::string& ns);
  // Cuts back every entry unused since `cutoff`; true when one was.
  bool expire(DeviceClock::time_point cutoff);
  // Checkpoint families: the state an entry's holder keeps after its tokens, to the checkpoint
  // store (and behind it to disk and the shared tier).
  void checkpoint_entry_end(const DeviceEntry& e);

 private:
  void demote(DeviceEntry& e);
  void save_to_host(const DeviceEntry& e);

  Tiers tiers_;
  CacheCounters& counters_;
  std::function<void(const std::string&)> repin_;
};

}  // namespace prefixd::cache
