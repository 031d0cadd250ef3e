// prefixd cache — the coordinator's side of models whose memory cannot be cut back to an earlier
// position (recurrent, hybrid, and sliding-window models without the full window cache): a
// finished sequence handed to SequenceKeeper::keep_state (an entry with its end state, or a
// checkpoint), and the device entries' window runs refreshed before they are trusted. Where such a
// sequence resumes is the reuse planner's (reuse_planner.cpp); where it takes checkpoints,
// ReusePlanner::checkpoint_positions.
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

void PrefixCache::Impl::donate_with_state(Lease& lease, SeqId seq, std::span<const Token> tokens) {
  const SequenceKeeper::Kept kept = keeper_.keep_state(lease, seq, tokens);
  if (!kept.tree_changed) {
    budget_.enforce_idle();
    publish();
    return;
  }
  after_tree_change(lease.lineage.ns);
}

void PrefixCache::Impl::refresh_window_entries() {
  for (EntryId id : device_.refresh_windows()) {
    DeviceEntry& e = device_.entry(id);
    const std::string ns = e.lineage.ns;
    trace("entry {} lost the start of its window cells; dropped", id);
    counters_.totals.device.evictions += 1;
    // Running requests that locked its cells hold their own copies of them: unlock first.
    for (auto& [seq, lease] : leases_) {
      if (lease.lineage.ns == ns && lease.locked > 0) unlock(device_, lease);
    }
    device_.drop(e);
    repin(ns);
  }
}

}  // namespace prefixd::cache
