// prefixd cache — what a finished request's sequence leaves in the cache. Its cells become a device
// entry (sharing, in the context, the cells of the prefix it has in common with the tree), taking
// over the holder of the same session's entry it extends (the previous turn); for checkpoint
// families the entry keeps the state after its tokens too, or the state becomes a checkpoint when
// an entry already holds the tokens or no holder is free. Nothing is kept below min_prefix, or
// what no request could reuse (a request without a session under session isolation keeps only
// the shared prefix).
#pragma once

#include <span>

#include "cache/backing_tiers.h"
#include "cache/checkpoint_store.h"
#include "cache/device_budget.h"
#include "cache/device_tier.h"
#include "cache/lease.h"
#include "cache/tiers.h"

namespace prefixd::cache {

class SequenceKeeper {
 public:
  SequenceKeeper(const Tiers& tiers, DeviceBudget& budget);

  struct Kept {
    bool tree_changed = false;  // false: nothing was kept (the sequence is emptied)
    EntryId entry = 0;          // the new device entry, 0 when none
  };
  // `lease` is no longer registered and holds no lock when this returns; `seq` is empty.
  // Trim families: the new entry's segments are not written behind yet (the caller does once the
  // pin co-owns its cells).
  Kept keep_cells(Lease& lease, engine::SeqId seq, std::span<const engine::Token> tokens);
  Kept keep_state(Lease& lease, engine::SeqId seq, std::span<const engine::Token> tokens);

 private:
  Tiers tiers_;
  DeviceBudget& budget_;
};

}  // namespace prefixd::cache
