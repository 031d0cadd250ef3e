// prefixd cache — the prompt-prefix KV cache: the coordinator of its tiers, and the contract of the
// request life the scheduler drives. Its words (configuration, keys, reports) are in cache_types.h;
// what the control plane and the views may ask, its admin face, in cache_admin.h.
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

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/artifact.h"
#include "cache/cache_admin.h"
#include "cache/cache_tree.h"
#include "cache/cache_types.h"
#include "cache/remote_fetch.h"
#include "engine/engine.h"

namespace prefixd::cache {

class PrefixCache final : public CacheAdmin {
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

  // The admin face (cache_admin.h).
  CacheTree tree(const TreeQuery& query) const override;
  HeldPrefix held(const RequestKey& key, std::span<const engine::Token> tokens) const override;
  ResetReport forget(const RequestKey& key, std::span<const engine::Token> tokens, engine::Pos keep) override;
  ArtifactInfo save_artifact(const RequestKey& key, std::span<const engine::Token> tokens,
                             const std::filesystem::path& path, const std::string& manifest = {}) override;
  ArtifactInfo load_artifact(const std::filesystem::path& path, const ScopeId& scope = {},
                             const std::function<void(const Artifact&)>& admit = {}) override;
  CacheSummary summary(std::optional<std::uint64_t> since = std::nullopt) override;
  std::vector<Digest> chain_of(const RequestKey& key, std::span<const engine::Token> prompt) const override;

  // Thread-safe: a snapshot published after every mutating call.
  CacheStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixd::cache
