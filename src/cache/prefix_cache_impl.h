// prefixd cache — the PrefixCache's internals: the coordinator of a request's life over the
// cache's components — DeviceTier (device_tier.h), HostTier, CheckpointStore, BackingTiers (the
// disk and the shared tier, backing_tiers.h), ReusePlanner (which source serves a prompt,
// reuse_planner.h), KeyPaths (what the tiers hold of a key's path; artifacts, key_paths.h) and
// HoldingsSummary. Its files: prefix_cache.cpp (progress, donate, release), prefix_cache_acquire.cpp,
// prefix_cache_checkpoints.cpp (donating a checkpoint family's sequence with its state),
// prefix_cache_eviction.cpp (budgets, demotion, eviction, compaction, reset), prefix_cache_stats.cpp
// (the published snapshot, self-check), prefix_cache_scopes.cpp (lineages under session isolation,
// holdings per scope, a scope's reset), prefix_cache_paths.cpp, prefix_cache_remote.cpp (the
// shared-tier lookup plan), prefix_cache_tickets.cpp (tickets, admission) and prefix_cache_artifacts.cpp.
// Nothing outside src/cache includes this file.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <memory>
#include <unordered_map>
#include <vector>
#include <spdlog/spdlog.h>

#include "cache/backing_tiers.h"
#include "cache/cache_tree.h"
#include "cache/cell_pin.h"
#include "cache/shifted_reuse.h"
#include "cache/checkpoint_store.h"
#include "cache/device_budget.h"
#include "cache/device_tier.h"
#include "cache/disk_store.h"
#include "cache/holdings_summary.h"
#include "cache/host_tier.h"
#include "cache/key_paths.h"
#include "cache/lease.h"
#include "cache/retention.h"
#include "cache/reuse_planner.h"
#include "cache/sequence_keeper.h"
#include "cache/ticket_state.h"
#include "cache/trace.h"
#include "cache/prefix_cache.h"
#include "cache/radix_tree.h"
#include "cache/remote_tier.h"
#include "cache/request_key.h"
#include "util/hex.h"

namespace prefixd::cache {

using Clock = std::chrono::steady_clock;
using engine::SeqId;
using engine::Token;

inline std::string short_hex(std::string_view bytes) { return util::to_hex(bytes.substr(0, 4)); }

inline CacheConfig resolve(CacheConfig config, const engine::Engine& engine) {
  const bool gpu = engine.model().on_accelerator;
  if (!config.device_cells) config.device_cells = gpu ? engine.context_size() / 2 : 0;
  if (!config.retain_tokens) config.retain_tokens = engine.context_size();
  config.retain_tokens = std::max<std::int64_t>(0, *config.retain_tokens);
  if (!engine.model().partial_copy_supported) config.enabled = false;  // a partial copy would abort
  if (!engine.model().has_memory) config.enabled = false;  // an encoder keeps nothing between calls
  // Measured on the CPU (docs/design.md): with idle cells demoted as soon as a request runs,
  // rewriting the device tier when idle made prefill slower, not faster; on a GPU it would be a
  // round trip over the bus. So automatic means never; `idle` remains an explicit choice.
  if (config.compaction == Compaction::automatic) config.compaction = Compaction::never;
  config.block_size = std::max(1, config.block_size);
  if (!Family::of(engine.model())->compactable()) config.compaction = Compaction::never;
  config.checkpoint_every = std::max(0, config.checkpoint_every);
  // A stream per sequence copies a sequence's cells only from its first position on
  // (Engine::copy_sequence): a host segment holds a whole sequence, so a restore never appends a
  // segment to cells restored before it.
  if (!engine.model().cells_shared) {
    const std::int32_t whole = (engine.context_size() + config.block_size - 1) / config.block_size * config.block_size;
    config.host_segment_tokens = std::max(config.host_segment_tokens, whole);
  }
  return config;
}

class PrefixCache::Impl {
 public:
  Impl(engine::Engine& engine, const CacheConfig& config, std::vector<SeqId> holders, SeqId scratch, SeqId pin)
      : engine_(engine), config_(resolve(config, engine)), family_owner_(Family::of(engine.model())), family_(*family_owner_),
        hasher_(config_.hash, config_.block_size),
        host_(engine, hasher_, config_.host_segment_tokens, config_.host_capacity_bytes,
              std::max<std::int64_t>(0, config_.host_max_segments), scratch),
        checkpoints_(hasher_, config_.checkpoint_capacity_bytes, config_.checkpoint_max_entries,
                     config_.checkpoints_per_session),
        backing_(engine, family_, config_, hasher_, host_, checkpoints_),
        device_(engine, family_, std::move(holders), scratch, config_.verify_every_operation),
        tiers_{engine, config_, family_, hasher_, device_, host_, checkpoints_, backing_},
        paths_(tiers_),
        summary_(hasher_, device_, host_, backing_),
        pin_(pin),
        budget_(tiers_, counters_, [this](const std::string& ns) { repin(ns); }),
        keeper_(tiers_, budget_),
        planner_(config_, family_, engine, hasher_, device_, host_, checkpoints_, backing_, counters_, leases_, pin,
                 [this] { budget_.enforce_running(); }),
        retentions_(*config_.retain_tokens) {
    const auto retained_key = [this](const Digest& key) { return retentions_.holds(key); };
    host_.store().set_retained([this](const Digest& key) { return retentions_.holds(key) || awaited_->contains(key); });
    checkpoints_.set_retained(retained_key);
    device_.set_retained([this](const DeviceEntry& e) { return retentions_.covers(e.lineage.ns, e.tokens); });
    std::random_device random;
    for (auto& byte : nonce_) byte = static_cast<std::uint8_t>(random());
    counters_.totals.disk.enabled = backing_.disk() != nullptr;
    publish();
  }

  const CacheConfig& config() const { return config_; }
  bool can_reuse() const { return config_.enabled; }  // enabled (any model family)
  ReuseMode reuse_mode() const { return family_.mode(); }

  // A request's life (prefix_cache.cpp); the public contract is in request_life.h and
  // prefix_cache.h. Tickets and admission (prefix_cache_tickets.cpp): admit() judges the ticket's lookup,
  // makes room, then acquires.
  Ticket open(const RequestKey& key, std::span<const Token> prompt, double seconds_per_token,
              std::function<void()> on_lookup_done);
  Ticket open_bypass(const ScopeId& scope);
  Admission admit(Ticket::State& ticket, SeqId seq, const Room& room);
  void abandon(Ticket::State& ticket);
  std::int32_t reusable(const Ticket::State& ticket) const;
  Acquisition acquire(const RequestKey& key, std::span<const Token> prompt, SeqId seq, RemoteFetch* fetched);
  Acquisition bypass(const ScopeId& scope);
  // Reuse by shifting (prefix_cache_shift.cpp). Before the exact prefix is adopted: the cached
  // sequence whose chunks would give the request the most — a device entry, locked whole so that
  // making room keeps it, or a chain of host segments, made the most recently used — (nullopt: the
  // request shifts nothing). After: past what `got` reused exactly, its chunks moved into the
  // lease's sequence; the lock goes and the budget is enforced again.
  std::int32_t shift_min_chunk(const Lease& lease) const;
  std::optional<ShiftDonor> reserve_shift_donor(const Lease& lease);
  Acquisition shift_into(Lease& lease, Acquisition got, std::optional<ShiftDonor> donor);
  // One chunk out of the donor into `seq` at its new positions; false when it could not be.
  bool move_chunk(const ShiftDonor& donor, const ShiftChunk& chunk, engine::SeqId seq);
  void advance(SeqId seq, std::int32_t computed);
  std::int32_t next_stop(SeqId seq) const;
  std::vector<Resolved> poll();
  void donate(SeqId seq, std::span<const Token> tokens);
  void release(SeqId seq);
  // What the ended request asked to keep (RequestKey::retain) of the `tokens` it donated: each
  // prefix with the host segments and checkpoints a restore of it needs (prefix_cache_retain.cpp).
  void retain(const Lease& lease, std::span<const Token> tokens);
  std::int32_t locked_by(SeqId seq) const;

  // Cells, budgets, eviction, compaction (prefix_cache_eviction.cpp).
  std::int64_t device_cells() const { return device_.cells(); }
  std::int64_t locked_cells() const { return device_.locked_cells(); }
  std::int64_t idle_cells() const { return device_cells() - locked_cells(); }
  std::int64_t budgeted_idle_cells() const { return device_.budgeted_idle_cells(); }
  std::int64_t release_device_cells(std::int64_t cells);
  bool make_room(std::int64_t running, std::int64_t need);
  std::int64_t spare_cells(std::int64_t running) const;
  // Cells of running sequences that are the tree's too (leases' locked prefixes).
  std::int64_t leased_cells() const;
  void expire();
  bool compaction_due() const;
  std::int64_t compact();
  // The idle tick at `now`: expire() when due, compact() when nothing runs. tick_due(): whether it
  // would do anything (on most turns of the engine thread's loop it does not).
  bool tick_due(Clock::time_point now, bool nothing_running) const {
    return now >= next_expiry_ || (nothing_running && compaction_due());
  }
  std::int64_t tick(Clock::time_point now, bool nothing_running);
  ResetReport reset();
  ResetReport reset_scope(const ScopeId& scope);  // prefix_cache_scopes.cpp

  // The disk tier.
  void flush_disk() { backing_.flush_disk(); }

  // The shared tier (prefix_cache_remote.cpp).
  std::shared_ptr<RemoteFetch> fetch_remote(const RequestKey& key, std::span<const Token> prompt,
                                            double seconds_per_token, std::function<void()> on_done);
  void abandon_remote();
  std::optional<RemoteStats> remote_stats() const {
    if (backing_.remote() == nullptr) return std::nullopt;
    return backing_.remote()->stats();
  }

  // Artifacts (prefix_cache_artifacts.cpp).
  ArtifactInfo save_artifact(const RequestKey& key, std::span<const Token> tokens, const std::filesystem::path& path,
                             const std::string& manifest);
  ArtifactInfo load_artifact(const std::filesystem::path& path, const ScopeId& scope,
                             const std::function<void(const Artifact&)>& admit);

  // A key's path (prefix_cache_paths.cpp).
  HeldPrefix held(const RequestKey& key, std::span<const Token> tokens) const;
  ResetReport forget(const RequestKey& key, std::span<const Token> tokens, engine::Pos keep);

  // The holdings summary (holdings_summary.h); a prompt's chain (prefix_cache_scopes.cpp).
  CacheSummary summary(std::optional<std::uint64_t> since, bool by_medium, const std::optional<ScopeId>& scope) {
    return summary_.summary(since, by_medium, scope);
  }
  void record_kv_events(KvEventScopes scopes) { summary_.record_events(std::move(scopes)); }
  std::vector<KvEvent> take_kv_events() { return summary_.take_events(); }
  std::vector<Digest> chain_of(const RequestKey& key, std::span<const Token> prompt) const;
  CacheTree tree(const TreeQuery& query) const;  // prefix_cache_tree.cpp

  // Counters and the published snapshot (prefix_cache_stats.cpp).
  CacheStats stats() const;
  // Every invariant the cache keeps; with `against_engine`, also each device entry's holder against
  // the positions the engine holds for it. Empty when none is violated.
  std::string verify(bool against_engine = false) const;



 private:

  // How `key`'s prompt is addressed: its namespace, forked at its shared prefix under a salt of
  // its session (session isolation); a request without a session gets a salt no other request
  // has (`order` is unique), so nothing it leaves past the prefix can ever be found.
  Lineage lineage_of(const RequestKey& key, std::uint64_t order) const;

  // Checkpoint families (prefix_cache_checkpoints.cpp).
  void donate_with_state(Lease& lease, SeqId seq, std::span<const Token> tokens);
  bool trimmable() const { return family_.trimmable(); }

  // Before the cache trusts its entries of a sliding-window model (DeviceTier::holds_its_start):
  // trim mode drops an entry that lost the start of its window cells; window-only mode moves the
  // entry's unbroken window run up.
  void refresh_window_entries();

  // After the tree of `ns` gained an entry: running sequences whose computed prompt prefix the
  // tree now holds beyond what they lock take the tree's cells for it (freeing their duplicates),
  // so that cells shared in the tree stay shared in the KV. Then the stats are published.
  void after_tree_change(const std::string& ns);
  void repin(const std::string& ns);

  void add_evictions(const HostStore::Evicted& evicted) { counters_.count_evictions(evicted); }
  // Counts an outcome once, when it is final, with the prompt's length.
  void record(const Acquisition& got, const ScopeId& scope, std::int64_t prompt_tokens);
  // Per-scope holdings of the device tier and the stores, with the scope counters, for publish().
  std::map<ScopeId, ScopeStats> scope_snapshot() const;

  template <typename... Args>
  void trace(fmt::format_string<Args...> format, Args&&... args) {
    cache::trace(config_, format, std::forward<Args>(args)...);
  }

  void publish();
  // Makes the pin own exactly the holders' cells and the running sequences' computed prefixes
  // (a sequence op cannot take a cell from one owner only, so the set is rebuilt).
  void rebuild_pin();

  engine::Engine& engine_;
  const CacheConfig config_;
  const std::unique_ptr<const Family> family_owner_;
  const Family& family_;  // how the loaded model's prompts are resumed (family.h)
  BlockHasher hasher_;
  HostTier host_;
  CheckpointStore checkpoints_;
  BackingTiers backing_;  // the disk and the shared tier
  DeviceTier device_;
  Tiers tiers_;  // the view of the tiers above that the components below hold
  KeyPaths paths_;  // what the tiers hold of a key's path; artifacts
  HoldingsSummary summary_;
  SeqId pin_;  // with pin_ + 1, co-owns the cells of every entry and running sequence (cell_pin.h), or -1
  std::map<SeqId, Lease> leases_;
  std::uint64_t next_order_ = 0;
  CacheCounters counters_;
  DeviceBudget budget_;
  SequenceKeeper keeper_;
  ReusePlanner planner_;
  Digest nonce_{};    // random per cache: salts of requests without a session
  Retentions retentions_;    // prefixes kept ahead of LRU eviction until their deadlines
  // Host segments the prompts of queued requests will restore, with how many of them wait for
  // each (open() to admit() or abandon()): eviction passes over them while anything else can go.
  // Under many more conversations than slots each one's history is needed again soonest by the
  // request already waiting for it; plain LRU would evict exactly those first, since the
  // conversation that has just run left the most recently used segments and returns last.
  // Shared with the tickets, which may outlive the cache and give their keys back when destroyed.
  std::shared_ptr<AwaitedSegments> awaited_ = std::make_shared<AwaitedSegments>();
  void await_segments(Ticket::State& ticket);
  Clock::time_point next_expiry_ = Clock::now();  // tick(): the first one expires, then once a second


  mutable std::mutex published_mutex_;
  CacheStats published_;
};

}  // namespace prefixd::cache
