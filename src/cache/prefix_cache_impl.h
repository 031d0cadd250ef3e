// prefixd cache — the PrefixCache's internals, shared by its implementation files:
// prefix_cache.cpp (a request's life after acquire: progress, donate, release),
// prefix_cache_acquire.cpp (the reuse planner's offers gathered and the chosen one carried out;
// its policy is reuse_plan.h), prefix_cache_checkpoints.cpp (checkpoint families: where states are
// taken, donating with a state), prefix_cache_eviction.cpp (budgets, demotion, eviction,
// compaction, reset), prefix_cache_stats.cpp (counters, published snapshot, self-check),
// prefix_cache_scopes.cpp (lineages under session isolation, holdings per scope, a scope's
// reset), prefix_cache_paths.cpp (what the tiers hold of a key's path, and forgetting it),
// prefix_cache_remote.cpp (the shared-tier lookup plan), prefix_cache_artifacts.cpp and
// prefix_cache_summary.cpp. The disk and the shared tier themselves are BackingTiers
// (backing_tiers.h). Nothing outside src/cache includes this file.
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
#include <unordered_map>
#include <vector>
#include <spdlog/spdlog.h>

#include "cache/backing_tiers.h"
#include "cache/checkpoint_store.h"
#include "cache/device_tier.h"
#include "cache/disk_store.h"
#include "cache/holdings_summary.h"
#include "cache/host_tier.h"
#include "cache/key_paths.h"
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
  if (!engine.model().partial_copy_supported) config.enabled = false;  // a partial copy would abort
  // Measured on the CPU (docs/design.md): with idle cells demoted as soon as a request runs,
  // rewriting the device tier when idle made prefill slower, not faster; on a GPU it would be a
  // round trip over the bus. So automatic means never; `idle` remains an explicit choice.
  if (config.compaction == Compaction::automatic) config.compaction = Compaction::never;
  config.block_size = std::max(1, config.block_size);
  if (!engine::memory_is_trimmable(engine.model())) config.compaction = Compaction::never;
  config.checkpoint_every = std::max(0, config.checkpoint_every);
  return config;
}

// A running request's sequence, from acquire() to donate() or release().
struct Lease {
  SeqId seq = -1;
  std::uint64_t order = 0;    // registration order: a lease only ever waits for an older one
  RequestKey key;
  Lineage lineage;            // lineage_of(key): how its prompt's prefixes are addressed
  Reach reach;                // reach_of(key)
  std::string session;        // session_id(key)
  std::vector<Token> prompt;
  std::int32_t computed = 0;  // positions [0, computed) of the prompt are in `seq`
  std::int32_t locked = 0;    // positions [0, locked) are the tree's cells, locked in the tree
  std::optional<SeqId> waits_for;
  std::int32_t wait_until = 0;
  std::vector<Digest> chain;          // checkpoint families: block chain of the prompt
  std::vector<engine::Pos> stops;     // checkpoint families: positions still to checkpoint, ascending
  engine::Pos window_from = 0;        // window-only models: where the sequence's unbroken window run starts
  // A reuse reaching past this position came from the shared tier (kNoFork: it gave nothing).
  std::int32_t remote_from = kNoFork;
};

// How much of `common` — the tokens `lease`'s prompt shares with `other`'s — `lease` may take from
// `other`'s cells: all of it within its own session, else no more than its reach.
inline std::int32_t shared_with(const Lease& lease, const Lease& other, std::int32_t common) {
  if (lease.reach.own && other.session == lease.session) return common;
  return std::min(common, lease.reach.others);
}

class PrefixCache::Impl {
 public:
  Impl(engine::Engine& engine, const CacheConfig& config, std::vector<SeqId> holders, SeqId scratch, SeqId pin)
      : engine_(engine), config_(resolve(config, engine)), hasher_(config_.hash, config_.block_size),
        host_(engine, hasher_, config_.host_segment_tokens, config_.host_capacity_bytes,
              std::max<std::int64_t>(0, config_.host_max_segments), scratch),
        checkpoints_(hasher_, config_.checkpoint_capacity_bytes, config_.checkpoint_max_entries,
                     config_.checkpoints_per_session),
        backing_(engine, config_, hasher_, host_, checkpoints_),
        mode_(engine::memory_is_trimmable(engine.model()) ? ReuseMode::trim : ReuseMode::checkpoints),
        device_(engine, std::move(holders), scratch, mode_ == ReuseMode::trim, config_.verify_every_operation),
        paths_(engine, config_, hasher_, host_, checkpoints_, backing_, device_, mode_ == ReuseMode::trim),
        summary_(hasher_, device_, host_, backing_),
        pin_(pin) {
    std::random_device random;
    for (auto& byte : nonce_) byte = static_cast<std::uint8_t>(random());
    stats_.disk.enabled = backing_.disk() != nullptr;
    publish();
  }

  const CacheConfig& config() const { return config_; }
  bool can_reuse() const { return config_.enabled; }
  ReuseMode reuse_mode() const { return mode_; }

  // A request's life (prefix_cache.cpp); the public contract is in prefix_cache.h.
  Acquisition acquire(const RequestKey& key, std::span<const Token> prompt, SeqId seq, RemoteFetch* fetched);
  Acquisition bypass(const ScopeId& scope);
  void advance(SeqId seq, std::int32_t computed);
  std::int32_t next_stop(SeqId seq) const;
  std::vector<Resolved> poll();
  void donate(SeqId seq, std::span<const Token> tokens);
  void release(SeqId seq);
  std::int32_t locked_by(SeqId seq) const;

  // Cells, budgets, eviction, compaction (prefix_cache_eviction.cpp).
  std::int64_t device_cells() const { return device_.cells(); }
  std::int64_t locked_cells() const { return device_.locked_cells(); }
  std::int64_t idle_cells() const { return device_cells() - locked_cells(); }
  std::int64_t budgeted_idle_cells() const { return device_.budgeted_idle_cells(); }
  std::int64_t release_device_cells(std::int64_t cells);
  bool make_room(std::int64_t running, std::int64_t need);
  void expire();
  bool compaction_due() const;
  std::int64_t compact();
  ResetReport reset();
  ResetReport reset_scope(const ScopeId& scope);  // prefix_cache_scopes.cpp

  // The disk tier (prefix_cache_disk.cpp).
  void flush_disk() { backing_.flush_disk(); }

  // The shared tier (prefix_cache_remote.cpp).
  std::shared_ptr<RemoteFetch> fetch_remote(const RequestKey& key, std::span<const Token> prompt,
                                            double seconds_per_token, std::function<void()> on_done);
  void abandon_remote();
  void flush_remote() { backing_.flush_remote(); }
  std::optional<RemoteStats> remote_stats() const {
    if (backing_.remote() == nullptr) return std::nullopt;
    return backing_.remote()->stats();
  }

  // Artifacts (prefix_cache_artifacts.cpp).
  ArtifactInfo save_artifact(const RequestKey& key, std::span<const Token> tokens, const std::filesystem::path& path,
                             const std::string& manifest);
  ArtifactInfo save_session_artifact(const ScopeId& scope, const std::string& session, const std::filesystem::path& path,
                                     const std::string& manifest);
  ArtifactInfo load_artifact(const std::filesystem::path& path, const ScopeId& scope,
                             const std::function<void(const Artifact&)>& admit);

  // A key's path (prefix_cache_paths.cpp).
  HeldPrefix held(const RequestKey& key, std::span<const Token> tokens) const;
  ResetReport forget(const RequestKey& key, std::span<const Token> tokens, engine::Pos keep);

  // The holdings summary (holdings_summary.h); a prompt's chain (prefix_cache_scopes.cpp).
  CacheSummary summary(std::optional<std::uint64_t> since) { return summary_.summary(since); }
  std::vector<Digest> chain_of(const RequestKey& key, std::span<const Token> prompt) const;

  // Counters and the published snapshot (prefix_cache_stats.cpp).
  CacheStats stats() const;
  // Every invariant the cache keeps; with `against_engine`, also each device entry's holder against
  // the positions the engine holds for it. Empty when none is violated.
  std::string verify(bool against_engine = false) const;
  // Checkpoint families: the positions of an n-token prompt where checkpoints are taken — the
  // key's boundaries, the session wall, every checkpoint_every tokens, n - 1 and n — ascending.
  // The one policy: plan_stops takes them there and the shared-tier lookup looks for them there.
  std::vector<engine::Pos> checkpoint_positions(const RequestKey& key, std::int32_t n) const;

  // With CacheConfig::verify_every_operation, checks every invariant when an operation ends (also
  // when it throws: a refused operation must leave the cache whole) and aborts on a violation, which
  // would otherwise surface far from its cause.
  class VerifiedAfter {
   public:
    VerifiedAfter(const Impl& impl, const char* operation) : impl_(impl), operation_(operation) {}
    ~VerifiedAfter() {
      if (!impl_.config().verify_every_operation) return;
      const std::string problems = impl_.verify(/*against_engine=*/true);
      if (problems.empty()) return;
      spdlog::critical("prompt cache invariant violated after {}: {}", operation_, problems);
      std::abort();
    }
    VerifiedAfter(const VerifiedAfter&) = delete;
    VerifiedAfter& operator=(const VerifiedAfter&) = delete;

   private:
    const Impl& impl_;
    const char* operation_;
  };


 private:

  // How `key`'s prompt is addressed: its namespace, forked at its shared prefix under a salt of
  // its session (session isolation); a request without a session gets a salt no other request
  // has (`order` is unique), so nothing it leaves past the prefix can ever be found.
  Lineage lineage_of(const RequestKey& key, std::uint64_t order) const;

  // The reuse planner's offers for `lease`'s prompt, the chosen one adopted into its sequence
  // (prefix_cache_acquire.cpp; the policy is reuse_plan.h). Trim families: cells, or a wait for an
  // older running request that is computing a longer prefix; checkpoint families: an exact state.
  Acquisition adopt_cells(Lease& lease);
  Acquisition adopt_state(Lease& lease);
  // The running request whose computed cells give the prompt the longest prefix now; with
  // `may_wait`, the older one sharing the most tokens with it (which a trim family may wait for).
  struct RunningOffer {
    const Lease* lease = nullptr;
    std::int32_t common = 0;  // tokens it shares with the prompt (within the request's reach)
    std::int32_t now = 0;     // of which it has computed
  };
  RunningOffer running_offer(const Lease& lease, std::span<const Token> query, bool may_wait) const;
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
  Acquisition resume_at_checkpoint(Lease& lease, const StateOffers& at);
  void copy_from_entry(Lease& lease, EntryId id, std::int32_t length);
  void copy_from_running(Lease& lease, const Lease& other, std::int32_t length);

  // Checkpoint families (prefix_cache_checkpoints.cpp).
  void plan_stops(Lease& lease);
  void donate_with_state(Lease& lease, SeqId seq, std::span<const Token> tokens);
  // Moves the state `holder` keeps after `tokens` into the checkpoint store.
  void checkpoint_entry_end(const DeviceEntry& e);
  bool trimmable() const { return mode_ == ReuseMode::trim; }

  // The host tier's plan for `query` after the disk's promotions (BackingTiers::plan_with_disk),
  // with what they evicted counted.
  HostTier::Plan plan_with_disk(const Lineage& lineage, std::span<const Token> query, std::int32_t on_device,
                                std::int32_t beat, std::int32_t& host_only);
  // Stores a checkpoint in the checkpoint store and behind it on disk and in the shared tier.
  bool keep_checkpoint(const Lineage& lineage, std::span<const Token> prefix, std::span<const Digest> chain,
                       engine::Bytes state, const std::string& session, CheckpointKind kind, engine::Pos window_from,
                       const ScopeId& scope);
  // Notes the tokens a session's latest sequence left, for save_session_artifact (bounded).
  void remember_session(const RequestKey& key, std::span<const Token> tokens);
  // A sliding-window model with the full window cache still lets a running sequence overwrite its
  // own cells that fell out of its window (libllama reuses them when only that sequence owns
  // them, then drops every position below from the sequence, keeping [min, max] unbroken): such a
  // sequence no longer holds its prefix from position 0 and must not be shared or kept.
  // libllama also lets any decoding sequence take over a cell that only one sequence owns and that
  // lies outside that owner's window, and then drops the owner's positions below it: a holder of
  // a sliding-window model loses the start of its window cells under memory pressure. Before the
  // cache trusts its entries: trim mode drops an entry that lost its start; window-only mode
  // moves the entry's unbroken window run up.
  void refresh_window_entries();
  // `length`: the positions [0, length) the sequence should hold (-1: whatever its last one is).
  bool holds_its_start(SeqId seq, std::int32_t length = -1) const {
    if (engine_.model().family != engine::ModelFamily::sliding_window || !trimmable()) return true;
    const engine::PosRange cells = engine_.sequence_positions(seq);
    if (cells.empty()) return length <= 0;
    return cells.min == 0 && (length < 0 || cells.max == length - 1);
  }
  bool window_only() const { return engine_.model().family == engine::ModelFamily::sliding_window && !trimmable(); }
  // Where `seq`'s unbroken run of window cells starts: what the cache tracked, or higher when
  // libllama dropped the cells below (it keeps each sequence's positions [min, max] unbroken).
  engine::Pos window_run(SeqId seq, engine::Pos tracked) const {
    if (!window_only()) return 0;
    return std::max(tracked, engine_.sequence_positions(seq).min);
  }

  void lock(Lease& lease, std::int32_t length);
  void unlock(Lease& lease);

  // After the tree of `ns` gained an entry: running sequences whose computed prompt prefix the
  // tree now holds beyond what they lock take the tree's cells for it (freeing their duplicates),
  // so that cells shared in the tree stay shared in the KV. Then the stats are published.
  void after_tree_change(const std::string& ns);
  void repin(const std::string& ns);

  // While a request runs the newest entry has no exemption: idle cells above the budget would make
  // every token it computes attend over them (on the CPU, budget 0: llama-server's single slot
  // likewise keeps its previous prompt only when the next one extends it).
  void enforce_running_budget();

  // Keeps idle cells within the budget, not counting the newest entry's own cells.
  void enforce_device_budget();

  // Frees a holder for a new entry of `ns` by demoting the least recently used entry that can be
  // dropped whole (nothing it holds is locked, or another entry holds it too).
  bool free_a_holder(const std::string& ns);

  // Moves an entry's K/V to the host tier, then gives up its cells that nobody else uses.
  void demote(DeviceEntry& e);
  void save_to_host(const DeviceEntry& e);

  void add_evictions(const HostStore::Evicted& evicted);
  void record(const Acquisition& got, const ScopeId& scope);  // counts an outcome once, when it is final
  // Per-scope holdings of the device tier and the stores, with the scope counters, for publish().
  std::map<ScopeId, ScopeStats> scope_snapshot() const;

  template <typename... Args>
  void trace(fmt::format_string<Args...> format, Args&&... args) {
    if (config_.trace) spdlog::info("cache trace: {}", fmt::format(format, std::forward<Args>(args)...));
  }

  void publish();
  // Makes the pin own exactly the holders' cells and the running sequences' computed prefixes
  // (a sequence op cannot take a cell from one owner only, so the set is rebuilt).
  void rebuild_pin();

  engine::Engine& engine_;
  const CacheConfig config_;
  BlockHasher hasher_;
  HostTier host_;
  CheckpointStore checkpoints_;
  BackingTiers backing_;  // the disk and the shared tier
  ReuseMode mode_;
  DeviceTier device_;
  KeyPaths paths_;  // what the tiers hold of a key's path; artifacts
  HoldingsSummary summary_;
  SeqId pin_;  // co-owns the cells of every entry and running prefix (window models), or -1
  std::map<SeqId, Lease> leases_;
  std::uint64_t next_order_ = 0;
  CacheStats stats_;  // counters; the rest of a snapshot is derived in publish()
  std::map<ScopeId, ScopeStats> scope_counters_;  // the counter fields of each scope's stats
  Digest nonce_{};    // random per cache: salts of requests without a session
  struct SessionPrompt {
    RequestKey key;
    std::vector<Token> tokens;
    std::uint64_t order = 0;
  };
  std::unordered_map<std::string, SessionPrompt> session_prompts_;  // by session_id(); the newest 1024
  std::uint64_t session_order_ = 0;


  mutable std::mutex published_mutex_;
  CacheStats published_;
};

}  // namespace prefixd::cache
