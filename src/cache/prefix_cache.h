// prefixd cache — the prompt-prefix KV cache. This header is the whole contract.
//
// Owns: which token prefixes have K/V kept, where (device tier: cells still in the llama context,
// held by "holder" sequence ids; host tier: serialized segments in RAM), and the budgets and
// eviction that bound them. A request asks acquire() to put the longest reusable prefix of its
// prompt into its own sequence, and gives its sequence back with donate() when it finishes.
// Must not know: HTTP, JSON, requests beyond their key and tokens.
// REQUIRES: every method except stats() is called from the one thread that owns the engine.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/block_hash.h"
#include "cache/host_store.h"
#include "cache/radix_tree.h"
#include "engine/engine.h"

namespace prefixd::cache {

struct CacheConfig {
  bool enabled = true;
  std::int32_t min_prefix = 32;           // shorter matches are not worth adopting
  bool apc_enabled = true;                // allow partial matches (shorter than the stored entry)
  std::int32_t block_size = 16;           // tokens per hashed block
  HashAlgorithm hash = HashAlgorithm::sha256;
  std::int32_t host_segment_tokens = 256; // host-tier unit; a multiple of block_size
  std::uint64_t host_capacity_bytes = 2ull << 30;
  std::int64_t max_entries = 1024;        // device entries + host segments
  std::chrono::seconds ttl{3600};         // unused this long: evicted
  std::int32_t device_cells = 8192;       // idle cells held by device entries
  // Rewrite idle entries at the low end of the context when the server goes idle (see compact()).
  bool compact_when_idle = false;
  bool trace = false;                     // log every decision
};

// Who is asking: requests share K/V only within one namespace; the session is a preference.
struct RequestKey {
  std::string namespace_digest;
  std::string session;
};

enum class Outcome { cold, hit_extend, hit_restore, partial, bypass };
const char* outcome_name(Outcome outcome);

struct Acquisition {
  Outcome outcome = Outcome::cold;
  std::int32_t reused = 0;   // positions [0, reused) of the destination sequence now hold K/V
  std::string tier;          // "device" or "host" on a hit
  bool in_session = false;
};

struct CacheStats {
  bool enabled = false;
  bool apc_enabled = false;
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t tokens_reused = 0;
  std::int64_t evictions_lru = 0;
  std::int64_t evictions_ttl = 0;
  std::int64_t evictions_capacity = 0;
  std::int64_t demotions = 0;          // device entries moved to the host tier
  std::int64_t failed_restores = 0;
  std::int64_t compactions = 0;        // device tier rewritten at the low end of the context
  std::int64_t device_entries = 0;
  std::int64_t device_tokens = 0;      // distinct cells held by idle entries
  std::uint64_t device_bytes = 0;
  std::int64_t device_cells_budget = 0;
  std::int64_t host_entries = 0;       // segments
  std::uint64_t host_bytes = 0;
  std::uint64_t host_capacity_bytes = 0;
  std::int64_t max_entries = 0;
  std::int64_t total_blocks_stored = 0;
  std::int64_t unique_block_hashes = 0;
  std::int64_t apc_active_entries = 0;
  std::int32_t block_size = 0;
  std::string hash;
};

struct CompactReport {
  std::int64_t cells = 0;              // cells rewritten; 0 when nothing was done
  std::vector<engine::SeqId> lost;     // running sequences that could not be restored (emptied)
};

struct ResetReport {
  std::int64_t entries = 0;
  std::uint64_t bytes = 0;
};

class PrefixCache {
 public:
  // `holders` are sequence ids the cache may keep entries in; `scratch` is one more id it uses
  // to save and restore segments. Neither may be used by anyone else.
  PrefixCache(engine::Engine& engine, CacheConfig config, std::vector<engine::SeqId> holders, engine::SeqId scratch);
  ~PrefixCache();

  const CacheConfig& config() const { return config_; }
  bool can_reuse() const;  // enabled and the model's memory can be trimmed

  // Puts the longest reusable prefix of `prompt`, at most prompt.size() - 1 tokens (one token is
  // always left to feed), into `dst`. REQUIRES: `dst` is empty.
  Acquisition acquire(const RequestKey& key, std::span<const engine::Token> prompt, engine::SeqId dst);
  // Takes over what `seq` holds for positions [0, tokens.size()); afterwards `seq` is empty.
  void donate(const RequestKey& key, std::span<const engine::Token> tokens, engine::SeqId seq);
  // Demotes idle device entries until `cells` cells are freed or none is left; returns cells freed.
  std::int64_t release_device_cells(std::int64_t cells);
  // Drops entries unused for longer than the TTL.
  void expire();
  // Attention runs over every cell up to the highest one in use, and a busy context leaves the
  // entries' cells scattered up to its end. compact() saves each entry (its part not shared with
  // an entry rewritten before it), empties the context and restores them from cell 0, so the
  // span is again the number of cells held. Returns the cells rewritten; 0 when disabled, when
  // nothing changed since the last compaction, or when a save fails (then nothing is touched).
  // A sequence that cannot be restored (a safety net: the cells fitted a moment ago) is emptied;
  // entries are dropped, running sequences are listed in `lost` for their owner to fail.
  // `running` lists every other sequence that holds cells (each holds exactly positions
  // [0, tokens.size()) of its tokens); they are rewritten too, sharing cells as before.
  // REQUIRES: no sequence outside the cache's and `running` holds cells.
  struct LiveSequence {
    engine::SeqId seq = -1;
    std::string namespace_digest;  // empty: shares cells with nothing
    std::span<const engine::Token> tokens;
  };
  CompactReport compact(std::span<const LiveSequence> running = {});
  bool compaction_due() const;  // enabled, and an entry was donated since the last compaction
  ResetReport reset();

  // Thread-safe: a snapshot published after every mutating call.
  CacheStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  CacheConfig config_;
};

}  // namespace prefixd::cache
