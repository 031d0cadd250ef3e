// prefixd cache — the reuse planner: a request's prompt offered to each source of its model's
// family (family.h, sources.h), the offers ranked (reuse_plan.h), a wait for an older running
// request that is computing a longer prefix where the family allows it, and the chosen offer
// adopted into the request's sequence. Planning reads the tiers only; the one adoption writes.
// Also where a checkpoint family's sequence takes its checkpoints, the one policy the shared-tier
// lookup follows too.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "cache/sources.h"

namespace prefixd::cache {

class ReusePlanner {
 public:
  // The tiers must outlive the planner; `make_room` demotes idle cells a request does not use.
  ReusePlanner(const CacheConfig& config, const Family& family, engine::Engine& engine, const BlockHasher& hasher,
               DeviceTier& device, HostTier& host, CheckpointStore& checkpoints, BackingTiers& backing,
               CacheCounters& counters, const std::map<engine::SeqId, Lease>& leases, engine::SeqId pin,
               std::function<void()> make_room);
  ReusePlanner(const ReusePlanner&) = delete;
  ReusePlanner& operator=(const ReusePlanner&) = delete;

  // The best offer for `lease`'s prompt now, adopted into its sequence, or a wait for an older
  // running request (Acquisition::waiting; the cache asks again when it has computed the shared
  // prefix). Checkpoint families also get the positions the sequence will checkpoint at.
  Acquisition acquire(Lease& lease);

  // Checkpoint families: the positions of an n-token prompt where checkpoints are taken — the
  // key's boundaries, the session wall, every checkpoint_every tokens, n - 1 and n — ascending.
  std::vector<engine::Pos> checkpoint_positions(const RequestKey& key, std::int32_t n) const;

 private:
  // The offers of the family's sources, in the family's order (offering changes no tier).
  std::vector<SourceOffer> offers(const ReuseQuery& query);
  ReuseSource& source(Source kind);
  Acquisition choose_and_adopt(Lease& lease, std::span<const engine::Token> query);
  // The positions this request's sequence will checkpoint at (Lease::stops).
  void plan_stops(Lease& lease) const;

  const CacheConfig& config_;
  const Family& family_;
  engine::Engine& engine_;
  const BlockHasher& hasher_;
  DeviceTier& device_;
  CheckpointStore& checkpoints_;
  CellCopies copies_;
  DeviceEntries entries_;
  RunningRequests running_;
  HostSegments host_segments_;
  EntryStates states_;
  Checkpoints saved_states_;
  WindowRuns windows_;
};

}  // namespace prefixd::cache
