// prefixd cache — the prompt-prefix KV cache. This header is the whole contract.
//
// Owns: which token prefixes have K/V kept, where (device tier: cells still in the llama context,
// held by "holder" sequence ids; host tier: serialized segments in RAM), the running requests'
// claims on them, and the budgets and eviction that bound them.
//
// The life of a request's sequence, all on the engine thread:
//   acquire()  registers the sequence and puts the longest reusable prefix of its prompt into it:
//              from an idle entry, from another running request that holds or is computing it
//              (then the request may have to wait, see poll(): when the other has less left to
//              compute up to the shared length than this one would compute without it), or from
//              the host tier;
//   advance()  after each prefill chunk and decoded token: how far the sequence now holds;
//   poll()     hands waiting sequences the prefix they waited for once it is computed;
//   donate()   at the end: the sequence's K/V becomes a device entry (or release(): dropped).
//
// Models whose memory cannot be cut back (recurrent, hybrid, window-only sliding window) resume
// only where their whole state exists: at a device entry's end, or at a checkpoint (their partial
// state after a prefix, taken at the positions next_stop() names) with the attention cells before
// it; they do not wait for other requests (prefix_cache_checkpoints.cpp, docs/design.md).
//
// Invariants (tests check each against the engine's cell count after every operation):
// - Shared in the tree means shared in the KV: entries of one namespace that share a prefix share
//   its cells, so device_cells() is exactly the number of cells the holders keep.
// - A running request that adopted cells from an entry locks them; locked cells are never given
//   up, and idle_cells() (= device_cells() - locked) is exactly what release_device_cells() could
//   free now.
// - Each tier stays within its own budget: idle device cells <= device_cells (besides the most
//   recently donated entry while no request runs; once one is admitted, that entry's cells the
//   request does not use count too), device entries <= holders, host bytes and segments <= theirs.
// - A reused token is the request's own token at that position, under the same namespace; at
//   least one prompt token is always left to feed (the one-token guard).
// - Under session isolation (RequestKey::shared_prefix), a token past the shared prefix is reused
//   only from the request's own session, in every tier: the device tree caps other sessions'
//   matches, and the lower tiers address everything past the prefix under a salt of the session
//   (a forked Lineage, block_hash.h). The whole shared prefix stays reusable by every session in
//   every tier: a wall off the host grid gets a wall segment (HostTier::wall_cut) and, for
//   checkpoint families, a checkpoint.
// - Every entry, segment, checkpoint and file carries the scope of the request that made it, and
//   each tier counts its holdings per scope as they change (scope.h).
// Must not know: HTTP, JSON, requests beyond their key and tokens.
// REQUIRES: every method except stats() is called from the one thread that owns the engine.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/artifact.h"
#include "cache/block_hash.h"
#include "cache/cache_tree.h"
#include "cache/disk_stats.h"
#include "cache/remote_tier.h"
#include "cache/scope.h"
#include "engine/engine.h"

namespace prefixd::cache {

// The sanitizer build (PREFIXD_SANITIZE) is the checked configuration: invariants run there always.
#ifdef PREFIXD_CHECKED_BUILD
inline constexpr bool kCheckedBuild = true;
#else
inline constexpr bool kCheckedBuild = false;
#endif

// Whether idle entries are rewritten at the low end of the context when the server goes idle.
enum class Compaction { automatic, idle, never };  // automatic: never (measured, docs/design.md)
Compaction parse_compaction(std::string_view name);  // throws std::invalid_argument
const char* compaction_name(Compaction compaction);

struct CacheConfig {
  bool enabled = true;
  std::int32_t min_prefix = 32;           // shorter matches are not worth adopting
  bool apc_enabled = true;                // allow partial matches (shorter than the stored entry)
  std::int32_t block_size = 16;           // tokens per hashed block
  HashAlgorithm hash = HashAlgorithm::blake3;
  std::int32_t host_segment_tokens = 256; // host-tier unit; a multiple of block_size
  std::uint64_t host_capacity_bytes = 2ull << 30;
  std::int64_t host_max_segments = 65536;
  std::chrono::seconds ttl{3600};         // unused this long: evicted
  // Idle cells device entries may keep (the most recently donated entry is exempt while no request
  // runs; see DeviceBudget::enforce_running and enforce_idle, device_budget.h). nullopt: by
  // backend — half the context when the model's layers run on a GPU, where attending over idle
  // cells is cheap next to a restore over the bus; 0 on the CPU, where every idle cell costs each
  // computed token a dot product per head while a host restore is a memory copy.
  std::optional<std::int32_t> device_cells;
  Compaction compaction = Compaction::automatic;
  bool trace = false;                     // log every decision
  // Checkpoints, for models whose memory cannot be cut back (recurrent, hybrid, and sliding-window
  // without the full window cache): where a prompt may be resumed. Taken at the boundaries the
  // request names, every `checkpoint_every` prompt tokens (0: not along the prompt), and before the
  // last prompt token.
  std::int32_t checkpoint_every = 2048;
  // When positive, checkpoints other than the one before the last prompt token are taken only at
  // multiples of it: a deterministic engine prefills in chunks between such multiples, and a
  // chunked recurrent layer (gated delta net) computes a position alike only when its chunk began
  // at the same place (engine::Engine::deterministic).
  std::int32_t checkpoint_alignment = 0;
  std::uint64_t checkpoint_capacity_bytes = 1ull << 30;
  std::int64_t checkpoint_max_entries = 4096;
  std::int32_t checkpoints_per_session = 32;
  // Retained prefixes (retention.h): the tokens each scope may hold ahead of LRU eviction for the
  // time its requests ask (RequestKey::retain). nullopt: the context size; 0: requests' retention
  // asks are refused (counted).
  std::optional<std::int64_t> retain_tokens;
  // The disk tier (empty path: none). Segments and checkpoints are written behind to verified,
  // content-addressed files there and survive restarts; see disk_store.h.
  std::string disk_path;
  std::uint64_t disk_capacity_bytes = 16ull << 30;
  std::uint64_t disk_queue_bytes = 256ull << 20;  // write-behind queue; a full one drops writes
  // The shared tier (empty: none): Valkey or Redis seeds redis://HOST:PORT (several: one cluster).
  // Everything written behind to disk is written behind there too; a prompt's prefix past the
  // local tiers is looked up there before the request is admitted (remote_tier.h).
  std::vector<std::string> remote_urls;
  std::int32_t remote_timeout_ms = 50;            // per store call, and a lookup's deadline
  std::uint64_t remote_queue_bytes = 256ull << 20;  // write-behind queue; a full one drops writes
  // Checks every invariant (verify(), and each device entry against the engine's cells) after every
  // operation that changes the cache; a violation is logged and aborts the process. For debugging
  // and the test suite (--debug-verify-cache); always on in the sanitizer build.
  bool verify_every_operation = kCheckedBuild;
};

// How the loaded model's prompts are reused (decided from its memory at load).
enum class ReuseMode { trim, checkpoints };
const char* reuse_mode_name(ReuseMode mode);

// Prompt positions [begin, end) computed in one piece: an image's tokens, which its projector's
// embeddings fill together (and, on some models, attend to each other both ways). A reuse never
// ends strictly inside one, and no checkpoint is planned there.
struct UnbrokenSpan {
  engine::Pos begin = 0;
  engine::Pos end = 0;
  friend bool operator==(const UnbrokenSpan&, const UnbrokenSpan&) = default;
};

// `length` when no span of `spans` (sorted) has it strictly inside, else that span's begin.
std::int32_t outside_unbroken(std::span<const UnbrokenSpan> spans, std::int32_t length);

// Keep positions [0, length) of a request's tokens for `duration` after the request ends.
struct RetainAsk {
  std::int32_t length = 0;
  std::chrono::seconds duration{0};
};

// Who is asking: requests share K/V only within one namespace; the session is a preference, or
// with a shared prefix, a wall past it.
struct RequestKey {
  std::string namespace_digest;
  std::string session;
  // Prompt positions where a later request is likely to diverge or resume (the start of each user
  // turn, the end of the system prompt): checkpoints are taken there. Sorted; may be empty.
  std::vector<engine::Pos> boundaries;
  // Whose entries the request leaves and whose counters it moves. A namespace belongs to one scope.
  ScopeId scope{};
  // Session isolation: positions [0, shared_prefix) may come from any session of the namespace,
  // later ones only from this session's own entries. A request without a session reuses nothing
  // past it and keeps nothing past it. kNoFork: no wall (sessions are a preference).
  std::int32_t shared_prefix = kNoFork;
  // Prefixes of this request's tokens to keep ahead of LRU eviction for a while once it is
  // donated (a cache_control breakpoint with a TTL): see retention.h.
  std::vector<RetainAsk> retain;
  // Ranges of the prompt computed in one piece (images); sorted, non-overlapping.
  std::vector<UnbrokenSpan> unbroken;
};

enum class Outcome { cold, hit_extend, hit_restore, partial, bypass };
inline constexpr int kOutcomeCount = 5;
const char* outcome_name(Outcome outcome);

enum class Tier { none, device, host, disk, remote };
inline constexpr int kTierCount = 5;
const char* tier_name(Tier tier);  // "" for none

struct Acquisition {
  Outcome outcome = Outcome::cold;
  std::int32_t reused = 0;   // positions [0, reused) of the sequence now hold K/V
  Tier tier = Tier::none;
  bool in_session = false;
  bool waiting = false;      // another running request is computing a longer prefix: see poll()
};

struct Resolved {
  engine::SeqId seq = -1;
  Acquisition acquisition;
};

// What one scope did and holds. Counters count its requests; holdings are counted by each tier
// as entries come and go (device cells: the spans of the scope's trees, exact like the total).
struct ScopeStats {
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t tokens_reused = 0;
  std::int64_t prompt_tokens = 0;  // of the requests that used the cache (not bypass): tokens_reused of them were served
  std::array<std::int64_t, kOutcomeCount> outcomes{};
  std::int64_t inflight_shares = 0;
  std::int64_t disk_hits = 0;
  std::int64_t remote_hits = 0;
  std::int64_t device_entries = 0;
  std::int64_t device_cells = 0;
  std::uint64_t device_bytes = 0;
  ScopeUsage host;         // segments
  ScopeUsage checkpoints;
  ScopeUsage disk;         // files (tokens: of the segment files)
};

struct CacheStats {
  bool enabled = false;
  bool apc_enabled = false;
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t tokens_reused = 0;
  std::int64_t prompt_tokens = 0;  // of the requests that used the cache (not bypass): tokens_reused of them were served
  std::array<std::int64_t, kOutcomeCount> outcomes{};  // by Outcome
  std::int64_t inflight_shares = 0;    // hits taken from another running request
  std::int64_t demotions = 0;          // device entries moved to the host tier
  std::int64_t device_evictions = 0;   // device entries dropped or cut back without demotion
  std::int64_t evictions_lru = 0;      // host segments evicted for the segment-count budget
  std::int64_t evictions_ttl = 0;      // device entries and host segments unused for the TTL
  std::int64_t evictions_capacity = 0; // host segments evicted for the byte budget
  std::int64_t failed_restores = 0;
  std::int64_t compactions = 0;        // device tier rewritten at the low end of the context
  std::int64_t device_entries = 0;
  std::int64_t device_holders = 0;     // device entry budget
  std::int64_t device_cells = 0;       // cells held by device entries (exact)
  std::int64_t device_locked_cells = 0;// of which running requests use too
  std::uint64_t device_bytes = 0;
  std::int64_t device_cells_budget = 0;
  std::int64_t device_states = 0;      // entries whose holder keeps the state at its end (checkpoint families)
  std::int64_t host_entries = 0;       // segments
  std::int64_t host_max_segments = 0;
  std::uint64_t host_bytes = 0;
  std::uint64_t host_capacity_bytes = 0;
  std::string reuse_mode;              // "trim" or "checkpoints"
  std::int64_t checkpoints = 0;
  std::uint64_t checkpoint_bytes = 0;
  std::uint64_t checkpoint_capacity_bytes = 0;
  std::int64_t checkpoint_max_entries = 0;
  std::int64_t checkpoint_sessions = 0;
  std::int64_t checkpoints_saved = 0;
  std::int64_t checkpoints_restored = 0;
  std::int64_t checkpoint_evictions_lru = 0;
  std::int64_t checkpoint_evictions_ttl = 0;
  std::int64_t checkpoint_evictions_capacity = 0;
  std::int64_t checkpoints_superseded = 0;
  std::int64_t checkpoint_refusals_diverged = 0;
  std::int64_t checkpoint_refusals_evicted = 0;
  std::int64_t checkpoint_refusals_namespace = 0;
  std::int64_t retained_prefixes = 0;  // live retentions (retention.h)
  std::int64_t retained_tokens = 0;    // the sum of their lengths
  std::int64_t retain_tokens_budget = 0;  // per scope
  std::int64_t retentions_added = 0;
  std::int64_t retentions_renewed = 0;
  std::int64_t retentions_refused = 0;
  std::int64_t retentions_lifted = 0;
  std::int64_t retentions_expired = 0;
  std::int64_t running = 0;            // sequences registered by acquire()
  std::int64_t waiting = 0;            // of which wait for another request's prefix
  std::int64_t total_blocks_stored = 0;
  std::int64_t unique_block_hashes = 0;
  std::int64_t apc_active_entries = 0;
  std::int32_t block_size = 0;
  std::string hash;
  DiskStats disk;
  RemoteStats remote;
  // Per scope: every scope that has made a request or holds anything. The counters and holdings
  // above are the sums of these.
  std::map<ScopeId, ScopeStats> scopes;
};

struct ResetReport {
  std::int64_t entries = 0;
  std::uint64_t bytes = 0;
  // forget(): device entries left longer than asked because running requests use their cells.
  std::int64_t locked_entries = 0;
};

// What the cache holds of a prefix for a key now (held()). Tier reaches are cumulative: the
// positions [0, n) the tiers up to that one rebuild exactly on the host tier's segment grid (what
// save_artifact would save from them).
struct HeldPrefix {
  // The longest prefix a request with the key could reuse: at least min_prefix tokens (else 0),
  // honouring session isolation; for checkpoint families only a position whose state is kept.
  // Not capped by the one-token guard: the whole query may be held.
  std::int32_t tokens = 0;
  std::int32_t device = 0;      // device entries' cells (checkpoint families without attention: 0)
  std::int32_t host = 0;        // device and host tiers
  std::int32_t disk = 0;        // device, host and disk tiers
  std::int32_t checkpoint = 0;  // checkpoint families: the latest checkpoint usable with them (0: none)
};

// What the cache holds, as content addresses (holdings_summary.cpp): for a router that sends a
// request where its prefix already is. `blocks` are the chain hashes (BlockHasher::chain) after
// every whole block of every prefix the device, host and disk tiers keep (checkpoints alone are not
// a prefix), unique, in no particular order. `version` changes exactly when the set does.
struct CacheSummary {
  std::uint64_t version = 0;
  bool unchanged = false;        // the caller's version is current: `blocks` is left empty
  Digest model_key{};            // model_key() of the loaded model and runtime
  std::vector<Digest> blocks;
};

class PrefixCache {
 public:
  // `holders` are sequence ids the cache may keep entries in; `scratch` is one more id it uses
  // to save and restore segments. Neither may be used by anyone else.
  // `pin`, when >= 0, is one more id the cache makes co-own every cell it relies on (holders'
  // and running requests' computed prefixes): see ModelInfo::window_pin.
  PrefixCache(engine::Engine& engine, CacheConfig config, std::vector<engine::SeqId> holders, engine::SeqId scratch,
              engine::SeqId pin = -1);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The configuration with every default resolved for this engine.
  const CacheConfig& config() const;
  ReuseMode reuse_mode() const;

  // Registers `seq` as running `prompt` and puts the longest reusable prefix, at most
  // prompt.size() - 1 tokens, into it. With `waiting` set, `seq` stays empty until poll()
  // resolves it. With the cache disabled the outcome is bypass and nothing is registered.
  // `fetched`: this prompt's completed shared-tier lookup (fetch_remote), whose verified values
  // are adopted first; a reuse that reaches into them reports tier remote.
  // REQUIRES: `seq` is empty and not registered.
  Acquisition acquire(const RequestKey& key, std::span<const engine::Token> prompt, engine::SeqId seq,
                      RemoteFetch* fetched = nullptr);
  // Counts a request of `scope` that does not use the cache (cache_prompt: false); returns its
  // acquisition.
  Acquisition bypass(const ScopeId& scope = {});
  // `seq` now holds K/V for positions [0, computed): of its prompt, then of the tokens it
  // generated (called after each decoded token too, so the pin covers them). A checkpoint planned
  // at `computed` is taken now.
  void advance(engine::SeqId seq, std::int32_t computed);
  // The next prompt position after `computed` where the cache takes a checkpoint of `seq`: a
  // prefill chunk must end there. -1 when none is planned.
  std::int32_t next_stop(engine::SeqId seq) const;
  // Waiting sequences whose prefix is now available hold it; each is returned once.
  std::vector<Resolved> poll();
  // Ends `seq`: what it holds for positions [0, tokens.size()) becomes a device entry (unless
  // covered already or not worth keeping); afterwards `seq` is empty and unregistered.
  void donate(engine::SeqId seq, std::span<const engine::Token> tokens);
  // Ends `seq` without keeping anything; afterwards it is empty and unregistered.
  void release(engine::SeqId seq);
  // Cells held by `seq` that the cache accounts (adopted from an entry and locked).
  std::int32_t locked_by(engine::SeqId seq) const;

  std::int64_t device_cells() const;  // cells the holders keep
  std::int64_t idle_cells() const;    // of which no running sequence uses: what could be freed
  // Idle cells that count against the device budget: all but those on the newest entry's path.
  std::int64_t budgeted_idle_cells() const;
  // Checks the cache's internal invariants (tree counts, locks, host LRU order: a segment is never
  // more recently used than the prefix it extends); returns what is violated, empty when none.
  std::string verify() const;
  // Demotes or cuts back least recently used entries until `cells` cells are freed or nothing
  // idle is left; returns the cells freed (exact).
  std::int64_t release_device_cells(std::int64_t cells);
  // Admission: whether a prompt that needs `need` cells fits in the context beside the cells the
  // cache holds and `running` — the cells the running requests' sequences hold or will hold for
  // what they have now, the cells they share with the cache included (counted once here). Frees
  // idle cells first when it would not.
  bool make_room(std::int64_t running, std::int64_t need);
  // Drops entries unused for longer than the TTL.
  void expire();
  // Attention runs over every cell up to the highest one in use, and a busy context leaves the
  // entries' cells scattered up to its end. compact() saves each entry (its part not shared with
  // an entry saved before it), empties the context and restores them from cell 0, so the span is
  // again the number of cells held. Returns the cells rewritten; 0 when not due or when a save
  // fails (then nothing is touched). REQUIRES: no sequence is running.
  std::int64_t compact();
  bool compaction_due() const;  // compaction on, nothing running, an entry donated since the last
  ResetReport reset();          // empties every tier; running sequences keep their cells
  // Removes every entry of `scope` from every tier (device, host, checkpoints, disk); other
  // scopes' entries and running sequences' cells stay.
  ResetReport reset_scope(const ScopeId& scope);
  // Blocks until the disk tier's write-behind queue is written (no-op without one).
  void flush_disk();

  // The shared tier. Plans the lookup of `prompt`'s prefix past what the device, host and disk
  // tiers rebuild and starts it on the tier's reader thread, which calls `on_done` when the result
  // is in (by the lookup's deadline, RemoteFetch::deadline). nullptr when there is no shared tier
  // or nothing it could add. The caller passes the fetch to acquire() once done, or calls
  // abandon_remote() when it stops waiting (counted).
  // `seconds_per_token`: what computing a prompt token costs now (the caller measures it; 0:
  // unknown, 1 ms is assumed): the request waits for the lookup until the timeout, or as long as
  // computing the tokens it could bring would take, whichever is longer.
  std::shared_ptr<RemoteFetch> fetch_remote(const RequestKey& key, std::span<const engine::Token> prompt,
                                            double seconds_per_token, std::function<void()> on_done);
  void abandon_remote();

  // The tiers' holdings as one radix tree per namespace, for people to browse (cache_tree.h).
  // A pure query: no counter, LRU order or tier changes.
  CacheTree tree(const TreeQuery& query) const;

  // A key's path (the control plane: a key names a token prefix). held() is a pure query: no
  // counter, LRU order, tier or file changes.
  HeldPrefix held(const RequestKey& key, std::span<const engine::Token> tokens) const;
  // Removes what the cache holds of `tokens` past position `keep`, in every tier of key's
  // namespace (within what `key` may reuse under session isolation): device entries that share
  // more than `keep` tokens with it are cut back to `keep` (trim mode, when that leaves at least
  // min_prefix) or dropped; host segments and disk files of the path that lie wholly at or past
  // `keep`, and the segments that extend them (one that also holds a position < keep stays whole:
  // `keep` is what another key or module needs); checkpoints of the path at positions in (keep,
  // tokens.size()]. Cells another entry uses (off the path: a prefix shared with it) stay; cells
  // running requests locked stay (their entries counted in locked_entries). Returns the device
  // entries cut or dropped plus the segments, checkpoints and files removed, and the bytes freed
  // (exactly what the stats lose). Waits for the disk tier's write-behind queue first.
  ResetReport forget(const RequestKey& key, std::span<const engine::Token> tokens, engine::Pos keep);

  // Artifacts (artifact.h). Saves the longest prefix of `tokens` the tiers can rebuild exactly and
  // `key` may reuse (held().tokens) — for checkpoint families, up to the highest position whose
  // state is kept — to `path`, with `manifest` in its header. Throws ArtifactError (nothing_cached
  // when no prefix of at least min_prefix tokens is held, io), std::invalid_argument when the
  // manifest is longer than kMaxArtifactManifestBytes (nothing written).
  ArtifactInfo save_artifact(const RequestKey& key, std::span<const engine::Token> tokens,
                             const std::filesystem::path& path, const std::string& manifest = {});
  // The same for the latest sequence the session (prompt_cache_key or user) of `scope` left.
  ArtifactInfo save_session_artifact(const ScopeId& scope, const std::string& session,
                                     const std::filesystem::path& path, const std::string& manifest = {});
  // Verifies a whole artifact, then calls `admit` (when given) with it, then stores its records in
  // the host tier and the checkpoint store (and behind them on disk). A refused artifact
  // (ArtifactError; `scope` when it belongs to another scope than `scope`) changes nothing, and
  // neither does one `admit` throws for: its exception propagates. The result carries the
  // artifact's manifest and tokens.
  ArtifactInfo load_artifact(const std::filesystem::path& path, const ScopeId& scope = {},
                             const std::function<void(const Artifact&)>& admit = {});

  // The holdings summary; with `since` equal to the current version only the version comes back
  // (unchanged). Per-segment chains are memoized (segments never change), so a repeated call
  // hashes only what is new.
  CacheSummary summary(std::optional<std::uint64_t> since = std::nullopt);
  // The chain hashes of `prompt`'s whole blocks as this cache addresses them for `key` (its
  // namespace, forked at the key's shared prefix for its session): what summary() lists once the
  // prompt is held. A pure query.
  std::vector<Digest> chain_of(const RequestKey& key, std::span<const engine::Token> prompt) const;

  // Thread-safe: a snapshot published after every mutating call.
  CacheStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixd::cache
