// prefixd cache — the sources (source.h) of both kinds of family, each holding only the tiers it
// reads. Trim families resume from any prefix of cells: DeviceEntries, RunningRequests,
// HostSegments (with the disk behind the host tier). Checkpoint families resume only where a whole
// state exists: EntryStates, Checkpoints (with the attention cells before the state from the
// device, a running request or the host tier, and the disk behind the store), WindowRuns.
// Source files: source_cells.cpp (the copies within the context) and source_restores.cpp.
#pragma once

#include <map>

#include "cache/source.h"

namespace prefixd::cache {

// Device entries' cells (Source::device). Without automatic prefix caching only an entry wholly
// within the prompt is matched.
class DeviceEntries final : public ReuseSource {
 public:
  DeviceEntries(const CacheConfig& config, const DeviceTier& device, CellCopies& copies);
  Source kind() const override { return Source::device; }
  SourceOffer offer(const ReuseQuery& query) const override;
  std::optional<Acquisition> adopt(Lease& lease, const SourceOffer& offer) override;

 private:
  const CacheConfig& config_;
  const DeviceTier& device_;
  CellCopies& copies_;
};

// The cells other running requests have computed (Source::running), in the same namespace and
// within the prompt's reach. Where the family waits for running requests, the offer names the
// older request sharing the most tokens with the prompt (computed or not), which may be waited
// for; else the request whose computed cells reach furthest, among those not waiting themselves.
class RunningRequests final : public ReuseSource {
 public:
  RunningRequests(const Family& family, const DeviceTier& device, const std::map<engine::SeqId, Lease>& leases,
                  CellCopies& copies);
  Source kind() const override { return Source::running; }
  SourceOffer offer(const ReuseQuery& query) const override;
  std::optional<Acquisition> adopt(Lease& lease, const SourceOffer& offer) override;

 private:
  const Family& family_;
  const DeviceTier& device_;
  const std::map<engine::SeqId, Lease>& leases_;
  CellCopies& copies_;
};

// Host-tier segments past the device entries' cells, the disk's files continuing them promoted
// first (Source::host, a restore).
class HostSegments final : public ReuseSource {
 public:
  HostSegments(const CacheConfig& config, engine::Engine& engine, const DeviceEntries& entries, DeviceTier& device,
               HostTier& host, BackingTiers& backing, CacheCounters& counters, CellCopies& copies, engine::SeqId pin);
  Source kind() const override { return Source::host; }
  SourceOffer offer(const ReuseQuery& query) const override;
  std::optional<Acquisition> adopt(Lease& lease, const SourceOffer& offer) override;

 private:
  // The plan cut back to the start of an unbroken span it would end inside: empty when that is
  // not past the device's part.
  HostTier::Plan outside_spans(const Lease& lease, HostTier::Plan plan, std::int32_t on_device) const;

  const CacheConfig& config_;
  engine::Engine& engine_;
  const DeviceEntries& entries_;
  DeviceTier& device_;
  HostTier& host_;
  BackingTiers& backing_;
  CacheCounters& counters_;
  CellCopies& copies_;
  engine::SeqId pin_;
};

// A device entry whose holder keeps the state after exactly its tokens (Source::entry_state).
class EntryStates final : public ReuseSource {
 public:
  EntryStates(const DeviceTier& device, CellCopies& copies);
  Source kind() const override { return Source::entry_state; }
  SourceOffer offer(const ReuseQuery& query) const override;
  std::optional<Acquisition> adopt(Lease& lease, const SourceOffer& offer) override;

 private:
  const DeviceTier& device_;
  CellCopies& copies_;
};

// A saved state (Source::checkpoint): the latest one the attention cells before it can be rebuilt
// for, from the device's entries, a running request or the host tier (with the disk's segments);
// a state only the disk keeps is promoted into the store first.
class Checkpoints final : public ReuseSource {
 public:
  Checkpoints(const CacheConfig& config, const Family& family, engine::Engine& engine, DeviceTier& device,
              HostTier& host, CheckpointStore& checkpoints, BackingTiers& backing, CacheCounters& counters,
              const RunningRequests& running, CellCopies& copies, engine::SeqId pin);
  Source kind() const override { return Source::checkpoint; }
  SourceOffer offer(const ReuseQuery& query) const override;
  std::optional<Acquisition> adopt(Lease& lease, const SourceOffer& offer) override;

 private:
  const CacheConfig& config_;
  const Family& family_;
  engine::Engine& engine_;
  DeviceTier& device_;
  HostTier& host_;
  CheckpointStore& checkpoints_;
  BackingTiers& backing_;
  CacheCounters& counters_;
  const RunningRequests& running_;
  CellCopies& copies_;
  engine::SeqId pin_;
};

// Window-only models: a device entry whose holder still has the window before the matched length
// unbroken, which is the state there as a checkpoint would be (Source::window).
class WindowRuns final : public ReuseSource {
 public:
  WindowRuns(const Family& family, const DeviceTier& device, CellCopies& copies);
  Source kind() const override { return Source::window; }
  SourceOffer offer(const ReuseQuery& query) const override;
  std::optional<Acquisition> adopt(Lease& lease, const SourceOffer& offer) override;

 private:
  const Family& family_;
  const DeviceTier& device_;
  CellCopies& copies_;
};

}  // namespace prefixd::cache
