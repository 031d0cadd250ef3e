// prefixd cache — a source: one place a prompt's prefix can be resumed from (family.h names them),
// behind one interface, in the shape of a KV connector. offer() says how far the source would take
// the prompt now, from which states and at what cost, and changes no tier; adopt() carries out the
// offer it made into the request's sequence. The reuse planner (reuse_planner.h) asks each source
// of the family, ranks the offers (reuse_plan.h) and has only the chosen one adopted, so the disk's
// files are read and promoted only for a request that takes them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>

#include "cache/backing_tiers.h"
#include "cache/cache_counters.h"
#include "cache/checkpoint_store.h"
#include "cache/device_tier.h"
#include "cache/host_tier.h"
#include "cache/lease.h"
#include "cache/reuse_plan.h"

namespace prefixd::cache {

// What a request asks every source.
struct ReuseQuery {
  const Lease& lease;
  std::span<const engine::Token> tokens;  // its prompt less the last token (the one-token guard)
  // Whether an offer may count on the disk's files. The planner asks again without them when a
  // file the chosen offer counted on did not read back.
  bool with_disk = true;
};

// A source's offer: the ranked part (Offer: the source and its reach), what adopting it costs, and
// the plan adopt() carries out. Each source fills the part of the plan it uses.
struct SourceOffer : Offer {
  std::int32_t copied = 0;     // tokens copied within the context (an entry's or a running request's cells)
  std::int32_t restored = 0;   // tokens restored from host RAM
  std::int32_t from_disk = 0;  // of those, tokens read from disk first
  bool state = false;          // a saved state replaces the partial one the cells come with

  RadixTree::Match entry;             // the device entry whose cells it copies
  const Lease* running = nullptr;     // the running request whose cells it copies, or waits for
  std::int32_t running_common = 0;    // tokens that request shares with the prompt (computed or not)
  std::int32_t running_computed = 0;  // of which it has computed (a checkpoint's cells may come from there)
  HostTier::Plan host;                // the host tier's segments past the entry's cells
  std::int32_t host_only = 0;         // how far the host tier alone reaches
  BackingTiers::DiskExtension disk;   // disk files promoted into the host tier first
  CheckpointStore::Found checkpoint;  // the kept state in memory it resumes at
  std::int32_t in_memory = 0;         // the longest state the device and the checkpoint store keep
  engine::Pos disk_checkpoint = 0;    // a state only the disk keeps, past every one in memory (0: none)
};

// Putting cells of the context into a request's sequence, and making room before a restore.
class CellCopies {
 public:
  CellCopies(engine::Engine& engine, DeviceTier& device, CacheCounters& counters, std::function<void()> make_room)
      : engine_(engine), device_(device), counters_(counters), make_room_(std::move(make_room)) {}

  // Positions [0, length) of an entry's cells, locked in the tree while the request runs.
  void from_entry(Lease& lease, EntryId id, std::int32_t length);
  // Positions [0, length) another running request has computed; those it locked stay locked.
  void from_running(Lease& lease, const Lease& other, std::int32_t length);
  // Checkpoint families: an entry's cells whose holder's state is the state at `length` (its end,
  // or an unbroken window run), with the window run's start; then room is made.
  Acquisition state_of_entry(Lease& lease, const RadixTree::Match& entry, std::int32_t length, Outcome outcome);
  // Demotes idle cells the request does not use (after what the context holds was adopted, so
  // that restored cells can take the freed ones).
  void make_room() { make_room_(); }

 private:
  engine::Engine& engine_;
  DeviceTier& device_;
  CacheCounters& counters_;
  std::function<void()> make_room_;
};

class ReuseSource {
 public:
  virtual ~ReuseSource() = default;
  virtual Source kind() const = 0;
  // How far this source takes the query's prompt now. Changes no tier.
  virtual SourceOffer offer(const ReuseQuery& query) const = 0;
  // Carries out `offer`, this source's own, into the lease's sequence (REQUIRES: it is empty) and
  // makes room. nullopt: the offer no longer stands (a disk file it counted on did not read back)
  // and the sequence is still empty; the planner asks again without the disk.
  virtual std::optional<Acquisition> adopt(Lease& lease, const SourceOffer& offer) = 0;
};

}  // namespace prefixd::cache
