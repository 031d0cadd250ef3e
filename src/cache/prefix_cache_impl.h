// prefixd cache — the PrefixCache's internals, shared by its implementation files:
// prefix_cache.cpp (a request's life: acquire, in-flight hand-over, donate, release),
// prefix_cache_eviction.cpp (budgets, demotion, eviction, compaction, reset),
// prefix_cache_stats.cpp (counters, published snapshot, self-check), prefix_cache_scopes.cpp
// (lineages under session isolation, holdings per scope, a scope's reset) and prefix_cache_paths.cpp
// (what the tiers hold of a key's path, and forgetting it). Nothing outside src/cache includes
// this file.
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

#include "cache/checkpoint_store.h"
#include "cache/disk_store.h"
#include "cache/host_tier.h"
#include "cache/prefix_cache.h"
#include "cache/radix_tree.h"
#include "cache/remote_tier.h"
#include "util/hex.h"

namespace prefixd::cache {

using Clock = std::chrono::steady_clock;
using engine::SeqId;
using engine::Token;

inline std::string short_hex(std::string_view bytes) { return util::to_hex(bytes.substr(0, 4)); }

inline std::int32_t common_prefix(std::span<const Token> a, std::span<const Token> b) {
  return static_cast<std::int32_t>(std::ranges::mismatch(a, b).in1 - a.begin());
}

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

// The session a request's per-session state is kept under: its scope and its session, so that two
// tenants' sessions of the same name never meet (checkpoint chains, the latest sequence, the
// device tree's per-session counts). "" for a request without a session.
inline std::string session_id(const RequestKey& key) {
  if (key.session.empty()) return {};
  return digest_string(key.scope) + key.session;
}

// What a request may reuse of other sessions' entries (RequestKey::shared_prefix).
inline Reach reach_of(const RequestKey& key) {
  if (key.shared_prefix == kNoFork) return {};
  return Reach{.others = key.shared_prefix, .own = !key.session.empty()};
}

// A finished sequence kept in the llama context under a holder sequence id.
struct DeviceEntry {
  EntryId id = 0;
  Lineage lineage;      // its namespace (the tree it is in) and how its segments are addressed
  std::string session;  // session_id() of the request that left it
  std::vector<Token> tokens;
  SeqId holder = -1;
  Clock::time_point last_used;
  // Checkpoint families: the holder keeps the state after exactly `tokens` (false once the entry
  // was cut back: then only its attention cells serve, up to a checkpoint).
  bool state_at_end = true;
  // Window-only sliding-window models: the holder's window cells run unbroken from here to its
  // end (cells below, copied with a shared prefix, may be there too but are not counted on).
  engine::Pos window_from = 0;
  ScopeId scope{};
};

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
        mode_(engine::memory_is_trimmable(engine.model()) ? ReuseMode::trim : ReuseMode::checkpoints),
        holder_count_(static_cast<std::int64_t>(holders.size())), free_holders_(std::move(holders)), scratch_(scratch),
        pin_(pin) {
    std::reverse(free_holders_.begin(), free_holders_.end());
    std::random_device random;
    for (auto& byte : nonce_) byte = static_cast<std::uint8_t>(random());
    open_disk();
    open_remote();
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
  std::int64_t device_cells() const;
  std::int64_t locked_cells() const;
  std::int64_t idle_cells() const { return device_cells() - locked_cells(); }
  std::int64_t budgeted_idle_cells() const;
  std::int64_t release_device_cells(std::int64_t cells);
  bool make_room(std::int64_t running, std::int64_t need);
  void expire();
  bool compaction_due() const;
  std::int64_t compact();
  ResetReport reset();
  ResetReport reset_scope(const ScopeId& scope);  // prefix_cache_scopes.cpp

  // The disk tier (prefix_cache_disk.cpp).
  void flush_disk() {
    if (disk_) disk_->flush();
  }

  // The shared tier (prefix_cache_remote.cpp).
  std::shared_ptr<RemoteFetch> fetch_remote(const RequestKey& key, std::span<const Token> prompt,
                                            double seconds_per_token, std::function<void()> on_done);
  void abandon_remote();
  void flush_remote() {
    if (remote_) remote_->flush();
  }
  std::optional<RemoteStats> remote_stats() const {
    if (!remote_) return std::nullopt;
    return remote_->stats();
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

  // The holdings summary (prefix_cache_summary.cpp).
  CacheSummary summary(std::optional<std::uint64_t> since);
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
  std::uint64_t device_bytes() const;

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

  // The disk tier (prefix_cache_disk.cpp). Every write is behind: records are serialized here on
  // the engine thread and written by the store's own thread.
  void open_disk();
  // The host tier's plan for `query`, after promoting from disk the segments that take it past
  // `beat` (what the device tier or a running request gives already). `host_only`: the length
  // the host tier alone reached.
  HostTier::Plan plan_with_disk(const Lineage& lineage, std::span<const Token> query, std::int32_t on_device,
                                std::int32_t beat, std::int32_t& host_only);
  // Queues the attention segments of positions [0, tokens.size()) of `holder` that the disk does
  // not hold yet.
  void write_behind(const Lineage& lineage, std::span<const Token> tokens, SeqId holder, const ScopeId& scope);
  // A segment leaving the host tier: to disk unless it is there.
  void spill(const Digest& key, const HostSegment& segment);
  // Stores a checkpoint in the checkpoint store and behind it on disk.
  bool keep_checkpoint(const Lineage& lineage, std::span<const Token> prefix, std::span<const Digest> chain,
                       engine::Bytes state, const std::string& session, CheckpointKind kind, engine::Pos window_from,
                       const ScopeId& scope);
  void checkpoint_to_disk(const std::string& ns, const Digest& key, engine::Pos position,
                          std::span<const std::uint8_t> state, engine::Pos window_from, const ScopeId& scope);
  // The shared tier (prefix_cache_remote.cpp): opened when URLs are configured (throws
  // std::invalid_argument for a bad one); a done fetch's verified values adopted into the host tier
  // and the checkpoint store for `lease` (returns the position past which they serve, kNoFork when
  // nothing was adopted); writes queued behind; a record's name in the shared tier (nullopt: not
  // shared, or no shared tier).
  void open_remote();
  std::int32_t adopt_remote(RemoteFetch& fetch, const Lease& lease);
  void remote_write(std::vector<RemoteTier::Write> writes);
  std::optional<std::string> remote_name_of(const Record& record) const;
  // Where the segments that rebuild the longest prefix of `tokens` exactly lie, on the host tier's
  // grid, using the tiers down to `deepest` (prefix_cache_paths.cpp). A pure query.
  // host_covering: a longer host segment at the same place starts with the cut's tokens (a tail
  // that a later save of a longer path covered, HostTier::drop_covered_siblings); `stored` is its key.
  enum class PieceFrom { host, device, disk, device_head, host_covering };
  struct Piece {
    HostTier::Cut cut;
    PieceFrom source;
    Digest stored{};
  };
  struct Rebuild {
    std::vector<Piece> pieces;  // in position order; they tile [0, reach())
    RadixTree::Match device;    // the device tree's match (`key`'s reach)
    std::int32_t reach() const { return pieces.empty() ? 0 : pieces.back().cut.stop; }
  };
  Rebuild rebuildable(const RequestKey& key, const Lineage& lineage, std::span<const Token> tokens, Tier deepest) const;
  // Checkpoint families: where the state after a prefix of `tokens` no longer than `limit` is
  // kept — at a device entry's end, in the checkpoint store, on disk (disk only with `with_disk`).
  struct KeptState {
    std::int32_t entry_end = 0;
    EntryId entry = 0;
    CheckpointStore::Found memory;
    std::int32_t disk = 0;
    std::int32_t best() const { return std::max({entry_end, memory.position, disk}); }
    std::int32_t checkpoint() const { return std::max(memory.position, disk); }
  };
  KeptState kept_state(const RequestKey& key, const Lineage& lineage, std::span<const Token> tokens,
                       std::span<const Digest> chain, std::int32_t limit, bool with_disk) const;
  // Positions in (have, limit] of `query` whose checkpoint the disk holds and the store does not,
  // at least min_prefix, highest first.
  std::vector<engine::Pos> disk_checkpoints(const Lineage& lineage, std::span<const Token> query,
                                           std::span<const Digest> chain, std::int32_t have, std::int32_t limit) const;
  // The segments that rebuild the longest prefix of `tokens` from the device, host and disk tiers
  // (rebuildable()), serialized or read, in position order (their tokens tile [0, reach)).
  std::vector<Record> gather_segments(const RequestKey& key, const Lineage& lineage, std::span<const Token> tokens);
  // Notes the tokens a session's latest sequence left, for save_session_artifact (bounded).
  void remember_session(const RequestKey& key, std::span<const Token> tokens);
  bool promote_checkpoint(const Lineage& lineage, std::span<const Token> query, std::span<const Digest> chain,
                          std::int32_t have, std::int32_t limit, const std::string& session, const ScopeId& scope);
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

  template <typename Pred>
  DeviceEntry* least_recently_used(Pred eligible) {
    DeviceEntry* victim = nullptr;
    for (auto& [id, e] : entries_) {
      if (!eligible(e) || !trees_.contains(e.lineage.ns)) continue;
      if (trees_.at(e.lineage.ns).keep_length(id) >= static_cast<std::int32_t>(e.tokens.size())) continue;  // frees nothing
      if (victim == nullptr || e.last_used < victim->last_used) victim = &e;
    }
    return victim;
  }

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

  // Cuts an entry back to `at_least` tokens or to what others use of it (locked cells, or a prefix
  // another entry holds), whichever is longer: dropped whole when that is nothing or another entry
  // holds it all.
  void cut_back(DeviceEntry& e, std::int32_t at_least = 0);

  void drop(DeviceEntry& e);
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
  ReuseMode mode_;
  std::int64_t holder_count_;
  std::vector<SeqId> free_holders_;
  SeqId scratch_;
  SeqId pin_;  // co-owns the cells of every entry and running prefix (window models), or -1
  std::unordered_map<EntryId, DeviceEntry> entries_;
  std::unordered_map<std::string, RadixTree> trees_;  // by namespace digest
  std::map<SeqId, Lease> leases_;
  EntryId next_id_ = 0;
  EntryId newest_ = 0;  // the most recently donated entry: outside the idle-cell budget
  std::uint64_t next_order_ = 0;
  bool donated_since_compaction_ = false;
  CacheStats stats_;  // counters; the rest of a snapshot is derived in publish()
  std::map<ScopeId, ScopeStats> scope_counters_;  // the counter fields of each scope's stats
  Digest nonce_{};    // random per cache: salts of requests without a session
  std::unique_ptr<DiskStore> disk_;  // null without a disk path
  std::unique_ptr<RemoteTier> remote_;  // null without a shared tier
  struct SessionPrompt {
    RequestKey key;
    std::vector<Token> tokens;
    std::uint64_t order = 0;
  };
  std::unordered_map<std::string, SessionPrompt> session_prompts_;  // by session_id(); the newest 1024
  std::uint64_t session_order_ = 0;
  Digest model_key_{};

  // summary()'s memo: block chains per segment key and per device entry, how many of them list
  // each block (the set is the keys), and the set's version.
  struct SummaryMemo {
    std::unordered_map<Digest, std::vector<Digest>, DigestHash> segments;
    std::map<std::pair<EntryId, std::size_t>, std::vector<Digest>> entries;
    std::unordered_map<Digest, std::int64_t, DigestHash> blocks;
    std::uint64_t version = 0;
  };
  SummaryMemo summary_memo_;

  mutable std::mutex published_mutex_;
  CacheStats published_;
};

}  // namespace prefixd::cache
