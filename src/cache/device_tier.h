// prefixd cache — the device tier (L0): finished sequences kept in the llama context, each under a
// holder sequence id, indexed by one radix tree per namespace.
//
// Owns the entries, the trees and the holder sequence ids, and every engine call on a holder.
// Invariants (verify()): every entry is in its namespace's tree with its tokens; holders are
// either an entry's or free; entries of a namespace that share a prefix share its cells (the
// caller copies a tree's cells into a sequence it donates, see PrefixCache::Impl::donate), so
// cells() is exactly the number of cells the holders keep. Which entry to demote, and moving an
// entry to the host tier, are the cache's decisions; this class answers and carries them out.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/block_hash.h"
#include "cache/cache_types.h"
#include "cache/family.h"
#include "cache/radix_tree.h"
#include "cache/request_key.h"
#include "engine/engine.h"

namespace prefixd::cache {

using DeviceClock = std::chrono::steady_clock;

// A finished sequence kept in the llama context under a holder sequence id.
struct DeviceEntry {
  EntryId id = 0;
  Lineage lineage;      // its namespace (the tree it is in) and how its segments are addressed
  std::string session;  // the session the request that left it ran in (its scope and session key; "" without one)
  std::vector<engine::Token> tokens;
  engine::SeqId holder = -1;
  DeviceClock::time_point last_used;
  // Checkpoint families: the holder keeps the state after exactly `tokens` (false once the entry
  // was cut back: then only its attention cells serve, up to a checkpoint).
  bool state_at_end = true;
  // Window-only sliding-window models: the holder's window cells run unbroken from here to its
  // end; it holds none below kept_window_from(its length) (keep_only_window, when it is made).
  engine::Pos window_from = 0;
  ScopeId scope{};
  // Positions [0, prompt_length) were the prompt of the request that left the entry, the rest its
  // own reply; -1: all of it was prompt. The host tier drops a reply the conversation did not keep
  // (HostTier::save).
  std::int32_t prompt_length = -1;
};

class DeviceTier {
 public:
  // `holders`: the sequence ids entries may use; `scratch`: a sequence the tier may use and must
  // leave empty. `family` must outlive the tier.
  DeviceTier(engine::Engine& engine, const Family& family, std::vector<engine::SeqId> holders, engine::SeqId scratch,
             bool checked);

  const std::unordered_map<EntryId, DeviceEntry>& entries() const { return entries_; }
  DeviceEntry& entry(EntryId id) { return entries_.at(id); }
  const DeviceEntry& entry(EntryId id) const { return entries_.at(id); }
  DeviceEntry* find(EntryId id);
  // The namespace's tree; null when the namespace holds nothing.
  RadixTree* tree(const std::string& ns);
  const RadixTree* tree(const std::string& ns) const;
  // The longest match of `query` among the entries `session` may reuse within `reach`
  // (RadixTree::match), or among entries wholly inside it (match_whole). Empty without a tree.
  RadixTree::Match match(const std::string& ns, std::span<const engine::Token> query, const std::string& session,
                         const Reach& reach = {}) const;
  RadixTree::Match match_whole(const std::string& ns, std::span<const engine::Token> query, const std::string& session,
                               const Reach& reach = {}) const;
  // Copies an entry's cells for positions [0, length) into `seq` and marks it used now.
  void copy_into(EntryId id, engine::SeqId seq, std::int32_t length);

  // Locks the cells of the tree's path along `tokens` up to `length` (a running request uses them).
  void lock(const std::string& ns, std::span<const engine::Token> tokens, std::int32_t length);
  void unlock(const std::string& ns, std::span<const engine::Token> tokens, std::int32_t length);

  std::int64_t holder_count() const { return holder_count_; }
  bool holder_free() const { return !free_holders_.empty(); }
  // A free holder, emptied; the caller fills it and passes it to add(). Requires holder_free().
  engine::SeqId take_holder();
  engine::SeqId scratch() const { return scratch_; }
  // Makes `entry` (its holder filled, from take_holder() or `superseded`'s) an entry of its
  // namespace's tree under a new id, replacing `superseded` (0: none). It becomes the newest.
  DeviceEntry& add(DeviceEntry entry, EntryId superseded);
  EntryId newest() const { return newest_; }
  // Gives up the entry and its holder's cells.
  void drop(DeviceEntry& e);
  // Cuts an entry back to `at_least` tokens or to what others use of it (locked cells, or a
  // prefix another entry holds), whichever is longer: dropped whole when that is nothing, when
  // another entry holds it all, or when the model has no attention cells to cut.
  void cut_back(DeviceEntry& e, std::int32_t at_least = 0);
  // Cuts back to `target` tokens every entry of `ns` that `session` (within `reach`) could reuse
  // more than `keep` tokens of along `tokens`; entries others share only up to `keep` are not
  // touched, nor a state without attention cells that running requests use. Counts the entries
  // cut and those kept locked into `report`.
  void cut_path(const std::string& ns, std::span<const engine::Token> tokens, const std::string& session,
                const Reach& reach, std::int32_t keep, std::int32_t target, ResetReport& report);
  // Drops every entry of `ns` (their holders' cells go); returns how many there were.
  std::int64_t drop_namespace(const std::string& ns);
  void clear();
  // Forgets the namespace's tree once its last entry is gone.
  void erase_if_empty(const std::string& ns);

  // Entries that hold a retained prefix (retention.h) are chosen by the two calls below only when
  // no other entry qualifies; among themselves, least recently used first.
  using Retained = std::function<bool(const DeviceEntry&)>;
  void set_retained(Retained retained) { retained_ = std::move(retained); }
  bool retained(const DeviceEntry& e) const { return retained_ && retained_(e); }
  // The least recently used entry that `eligible` accepts and whose cut-back would free a cell.
  DeviceEntry* least_recently_used(const std::function<bool(const DeviceEntry&)>& eligible);
  // The least recently used entry that can be dropped whole: nothing it holds is locked, or
  // another entry holds it too.
  DeviceEntry* least_recently_used_droppable();

  std::int64_t cells() const;         // cells the holders keep (exact; 0 without attention cells)
  std::int64_t locked_cells() const;  // of which running requests use
  // Idle cells, not counting the newest entry's own (see the idle budget in prefix_cache.h).
  std::int64_t budgeted_idle_cells() const;
  std::uint64_t bytes() const { return static_cast<std::uint64_t>(cells()) * kv_bytes_per_token_; }
  // Its holdings for a stats snapshot; the budget, the states and the counters of demotions,
  // evictions and compactions are the coordinator's to add (prefix_cache_stats.cpp).
  DeviceTierStats stats() const {
    return DeviceTierStats{.entries = static_cast<std::int64_t>(entries().size()),
                           .holders = holder_count(),
                           .cells = cells(),
                           .locked_cells = locked_cells(),
                           .bytes = bytes()};
  }
  // Cells of each namespace's tree (0 without attention cells).
  std::int64_t cells_of(const std::string& ns) const;

  // Rewrites every entry from cell 0, oldest first (an entry's base, the earlier one sharing its
  // longest prefix, before it). Returns the cells rewritten, and the entries lost (dropped) when a
  // rewrite failed.
  struct Compacted {
    std::int64_t cells = 0;
    std::int64_t lost = 0;
  };
  Compacted compact();
  bool donated_since_compaction() const { return donated_since_compaction_; }

  // The invariants above; with `against_engine`, also each trimmable entry's holder against the
  // positions the engine holds for it. Empty when none is violated.
  std::string verify(bool against_engine) const;

  // Sliding-window models. With the full window cache, libllama still lets a running sequence
  // overwrite its own cells that fell out of its window (when only that sequence owns them), then
  // drops every position below from it, keeping [min, max] unbroken; it also lets any decoding
  // sequence take over a cell only one sequence owns outside that owner's window. So a sequence
  // (or a holder) may no longer hold its prefix from position 0.
  // `length`: the positions [0, length) `seq` should hold (-1: whatever its last one is).
  bool holds_its_start(engine::SeqId seq, std::int32_t length = -1) const;
  // Before the entries are trusted: the full window cache (trim mode) returns the entries that lost
  // the start of their cells (to be dropped); window-only mode moves each entry's unbroken window
  // run up, and an entry whose window no longer reaches its end loses its end state.
  std::vector<EntryId> refresh_windows();
  // Where `seq`'s unbroken run of window cells starts: `tracked`, or higher when libllama dropped
  // the cells below (0 unless the family is window-only).
  engine::Pos window_run(engine::SeqId seq, engine::Pos tracked) const;
  // Window-only models: the first position whose window cells a holder ending at `end` keeps, the
  // window the next position attends to plus the one before (so an entry also serves a prompt
  // that repeats it, which resumes one token early under the one-token guard).
  engine::Pos kept_window_from(engine::Pos end) const;
  // Window-only models: drops `holder`'s window-layer cells below kept_window_from(end), leaving
  // every attention cell where it is (metadata only, through the scratch sequence; no K/V moves).
  //
  // Why: libllama sizes the window cache at about window × sequences + one batch, and a decode
  // may take over a window cell only when ONE sequence owns it and it lies behind that owner's
  // window. A sequence that prefills alone leaves all its cells in the pool (empty cells are taken
  // first), the holder inherits them, and a request adopting the entry shares them all: shared,
  // they can never be taken over, and the next batch finds no cell (the 500 of a chat's second
  // turn). Invariant kept: a holder owns at most `window` window cells, so every window cell two
  // sequences share is one of some holder's few, and the cells no sequence can give up number at
  // most window × sequences, which leaves a batch room.
  void keep_only_window(engine::SeqId holder, engine::Pos end);

 private:
  // Whether `e` should go before `victim` (nullptr: anything goes first).
  bool evicts_before(const DeviceEntry& e, const DeviceEntry* victim) const;
  Retained retained_;
  engine::Engine& engine_;
  const Family& family_;  // without attention cells, holders keep states only
  std::int64_t holder_count_;
  std::vector<engine::SeqId> free_holders_;
  engine::SeqId scratch_;
  bool checked_;
  std::uint64_t kv_bytes_per_token_;
  std::unordered_map<EntryId, DeviceEntry> entries_;
  std::unordered_map<std::string, RadixTree> trees_;  // by namespace digest
  EntryId next_id_ = 0;
  EntryId newest_ = 0;  // the most recently added entry: outside the idle-cell budget
  bool donated_since_compaction_ = false;
};

}  // namespace prefixd::cache
