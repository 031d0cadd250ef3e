// prefixd cache — the reuse planner: each source's offer for a request's prompt gathered from the
// tiers, the one chosen (reuse_plan.h) carried out into the request's sequence, and the tier that
// served it credited. Also where a checkpoint family's sequence takes its checkpoints, the one
// policy the shared-tier lookup follows too.
//
// What the context holds is adopted first; the cache then demotes idle cells the request does not
// use (`make_room`), before a restore, so restored cells can take the freed ones.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "cache/backing_tiers.h"
#include "cache/cache_counters.h"
#include "cache/checkpoint_store.h"
#include "cache/device_tier.h"
#include "cache/host_tier.h"
#include "cache/lease.h"
#include "cache/tiers.h"

namespace prefixd::cache {

class ReusePlanner {
 public:
  ReusePlanner(const Tiers& tiers, CacheCounters& counters, const std::map<engine::SeqId, Lease>& leases,
               engine::SeqId pin, std::function<void()> make_room);

  // The best source for `lease`'s prompt now, adopted into its sequence. Trim families: cells, or
  // a wait for an older running request that is computing a longer prefix (poll() asks again);
  // checkpoint families: an exact state, and the positions the sequence will checkpoint at.
  Acquisition acquire(Lease& lease);

  // Checkpoint families: the positions of an n-token prompt where checkpoints are taken — the
  // key's boundaries, the session wall, every checkpoint_every tokens, n - 1 and n — ascending.
  std::vector<engine::Pos> checkpoint_positions(const RequestKey& key, std::int32_t n) const;

 private:
  struct RunningOffer {
    const Lease* lease = nullptr;
    std::int32_t common = 0;  // tokens it shares with the prompt (within the request's reach)
    std::int32_t now = 0;     // of which it has computed
  };
  // What the tiers offer a checkpoint family's prompt.
  struct StateOffers {
    RadixTree::Match whole;              // an entry wholly within the prompt (its end state, if kept)
    RadixTree::Match device;             // the longest entry sharing cells with the prompt
    RunningOffer running;                // a running request's cells (models with attention layers)
    std::int32_t host_only = 0;          // how far the host tier reached before disk promotion
    CheckpointStore::Found checkpoint;   // the latest checkpoint the attention cells can reach
    std::int32_t in_memory = 0;          // the longest state the device and checkpoint store kept
    bool promoted = false;               // a checkpoint was promoted from disk for this prompt
  };

  Acquisition adopt_cells(Lease& lease);
  Acquisition adopt_state(Lease& lease);
  Acquisition resume_at_checkpoint(Lease& lease, const StateOffers& at);
  // The positions this request's sequence will checkpoint at (Lease::stops).
  void plan_stops(Lease& lease) const;
  // The running request whose computed cells give the prompt the longest prefix now; with
  // `may_wait`, the older one sharing the most tokens with it (which a trim family may wait for).
  RunningOffer running_offer(const Lease& lease, std::span<const engine::Token> query, bool may_wait) const;
  // The host tier's plan for `query` after the disk's promotions, their evictions counted.
  HostTier::Plan plan_with_disk(const Lineage& lineage, std::span<const engine::Token> query, std::int32_t on_device,
                                std::int32_t beat, std::int32_t& host_only);
  void copy_from_entry(Lease& lease, EntryId id, std::int32_t length);
  void copy_from_running(Lease& lease, const Lease& other, std::int32_t length);

  Tiers tiers_;
  CacheCounters& counters_;
  const std::map<engine::SeqId, Lease>& leases_;
  engine::SeqId pin_;
  std::function<void()> make_room_;
};

}  // namespace prefixd::cache
