// prefixd cache — the words of the prompt cache's contract: its configuration, a request's key,
// what an acquisition did, the counters and holdings it reports, and the answers of its admin face.
// Plain values only: the scheduler, the control plane and the views use them without seeing the
// cache's machinery (prefix_cache.h) or its admin face's implementation (cache_admin.h).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/block_hash.h"
#include "cache/disk_stats.h"
#include "cache/remote_tier.h"
#include "cache/scope.h"
#include "engine/types.h"

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
  std::int32_t min_prefix = 16;           // one block: adopting it costs less than computing it
  bool apc_enabled = true;                // allow partial matches (shorter than the stored entry)
  // --cache-reuse: past the longest exact prefix, chunks of at least this many prompt tokens that
  // a device entry holds later in its sequence are moved to their positions in the prompt (their
  // keys re-rotated) instead of computed. 0: off. Gives up exactness (Acquisition::shifted); only
  // where the engine can shift and the family is dense.
  std::int32_t shift_reuse_min = 0;
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
  // The request's n_cache_reuse: -1 the server's CacheConfig::shift_reuse_min, 0 off, else its own.
  std::int32_t shift_reuse_min = -1;
  // The LoRA adapters its namespace computes under, in words (empty: none); KV events carry it
  // with the namespace's blocks. The namespace digest already keeps other adapters' K/V apart.
  std::string adapter;
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
  bool waiting = false;      // another running request is computing a longer prefix: see RequestLife::take_resolved
  std::int32_t shifted = 0;  // of `reused`, moved from later positions of a device entry (shift_reuse_min)
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

// A stats snapshot is composed of each part's own stats: the requests' counters (CacheCounters),
// the device tier (DeviceTier, with the budgets and the counters the coordinator moves as it
// demotes, evicts and compacts), the host tier (HostStore), the checkpoint store, the retentions,
// the disk tier and the shared tier. Where a report names one figure for several tiers (an
// eviction's TTL reason, the cache's entries and bytes), CacheStats sums them.

// The requests' counters and the sequences running now.
struct RequestStats {
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t tokens_reused = 0;
  std::int64_t prompt_tokens = 0;  // of the requests that used the cache (not bypass): tokens_reused of them were served
  // Prompt tokens moved from later positions of a cached sequence (--cache-reuse), apart from
  // tokens_reused (exact prefixes), and the requests that took some.
  std::int64_t tokens_shifted = 0;
  std::int64_t shifted_requests = 0;
  // tokens_reused by the deepest tier that served part of each prefix (Acquisition::tier).
  std::array<std::int64_t, kTierCount> tokens_reused_by_tier{};
  std::array<std::int64_t, kOutcomeCount> outcomes{};  // by Outcome
  std::int64_t inflight_shares = 0;  // hits taken from another running request
  std::int64_t running = 0;          // sequences registered by acquire()
  std::int64_t waiting = 0;          // of which wait for another request's prefix
};

struct DeviceTierStats {
  std::int64_t entries = 0;
  std::int64_t holders = 0;       // entry budget
  std::int64_t cells = 0;         // cells held by entries (exact)
  std::int64_t locked_cells = 0;  // of which running requests use too
  std::uint64_t bytes = 0;
  std::int64_t cells_budget = 0;
  std::int64_t states = 0;        // entries whose holder keeps the state at its end (checkpoint families)
  std::int64_t demotions = 0;     // entries moved to the host tier
  std::int64_t evictions = 0;     // entries dropped or cut back without demotion
  std::int64_t evictions_ttl = 0; // entries unused for the TTL
  std::int64_t compactions = 0;   // the tier rewritten at the low end of the context
};

struct HostTierStats {
  std::int64_t entries = 0;  // segments
  std::int64_t max_segments = 0;
  std::uint64_t bytes = 0;
  std::uint64_t capacity_bytes = 0;
  std::int64_t evictions_lru = 0;       // segments evicted for the segment-count budget
  std::int64_t evictions_ttl = 0;       // segments unused for the TTL
  std::int64_t evictions_capacity = 0;  // segments evicted for the byte budget
  std::int64_t failed_restores = 0;     // segments that could not be restored
};

struct CheckpointStats {
  std::int64_t entries = 0;
  std::uint64_t bytes = 0;
  std::uint64_t capacity_bytes = 0;
  std::int64_t max_entries = 0;
  std::int64_t sessions = 0;
  std::int64_t saved = 0;
  std::int64_t restored = 0;
  std::int64_t evictions_lru = 0;
  std::int64_t evictions_ttl = 0;
  std::int64_t evictions_capacity = 0;
  std::int64_t superseded = 0;
  std::int64_t refusals_diverged = 0;
  std::int64_t refusals_evicted = 0;
  std::int64_t refusals_namespace = 0;
};

struct RetentionStats {
  std::int64_t prefixes = 0;                  // live retentions (retention.h)
  std::int64_t tokens = 0;                    // the sum of their lengths
  std::int64_t budget_tokens_per_scope = 0;
  std::int64_t added = 0;
  std::int64_t renewed = 0;
  std::int64_t refused = 0;
  std::int64_t lifted = 0;
  std::int64_t expired = 0;
};

struct CacheStats {
  bool enabled = false;
  bool apc_enabled = false;
  std::string reuse_mode;  // "trim" or "checkpoints"
  std::int32_t block_size = 0;
  std::string hash;
  RequestStats requests;
  DeviceTierStats device;
  HostTierStats host;
  CheckpointStats checkpoints;
  RetentionStats retained;
  DiskStats disk;
  RemoteStats remote;
  // Blocks across the device and host tiers.
  std::int64_t total_blocks_stored = 0;
  std::int64_t unique_block_hashes = 0;
  std::int64_t apc_active_entries = 0;
  // Per scope: every scope that has made a request or holds anything. The counters and holdings
  // above are the sums of these.
  std::map<ScopeId, ScopeStats> scopes;

  // The sums a report names as one figure.
  std::int64_t evictions_ttl() const { return device.evictions_ttl + host.evictions_ttl; }
  std::int64_t entries() const { return device.entries + host.entries + checkpoints.entries; }
  std::uint64_t bytes() const { return device.bytes + host.bytes + checkpoints.bytes; }
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
  // Asked for: the blocks of each tier, by Medium (kv_events.h: device, host, disk), unique, in no
  // particular order; a block two tiers hold is in both.
  std::vector<std::vector<Digest>> by_medium;
};

}  // namespace prefixd::cache
