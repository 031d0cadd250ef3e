// prefixd cache — the tiers, as the cache's components that touch all of them see them: the
// engine, the resolved configuration, the model family, the block hasher, and each tier (device,
// host, checkpoint store, and the disk and shared tier behind them). PrefixCache::Impl owns them
// all; the budget, the keeper and the path walker hold this view (the reuse planner's sources hold
// only the tiers each reads, sources.h).
#pragma once

#include "cache/backing_tiers.h"
#include "cache/checkpoint_store.h"
#include "cache/device_tier.h"
#include "cache/host_tier.h"

namespace prefixd::cache {

struct Tiers {
  engine::Engine& engine;
  const CacheConfig& config;
  const Family& family;
  const BlockHasher& hasher;
  DeviceTier& device;
  HostTier& host;
  CheckpointStore& checkpoints;
  BackingTiers& backing;

  bool trimmable() const { return family.trimmable(); }
};

}  // namespace prefixd::cache
