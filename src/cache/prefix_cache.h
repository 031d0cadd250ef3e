// prefixd cache — the prompt-prefix KV cache: the coordinator of its tiers. Its words
// (configuration, keys, reports) are in cache_types.h. It is used only through its three faces:
// the request life the scheduler drives (request_life.h), what the control plane and the views may
// ask (the admin face, cache_admin.h), and what its owner does besides — configuration, stats,
// reset, KV events (cache_operations.h). Tests and benchmarks look inside through
// PrefixCacheProbe (prefix_cache_probe.h); nothing else does.
//
// Owns: which token prefixes have K/V kept, where (device tier: cells still in the llama context,
// held by "holder" sequence ids; host tier: serialized segments in RAM), the running requests'
// claims on them, and the budgets and eviction that bound them.
//
// The life of a request's sequence (request_life.h), all on the engine thread: open() a ticket
// when it is queued (the shared-tier lookup starts), admit() it into a free sequence — room made,
// then the longest reusable prefix of its prompt put into the sequence: from an idle entry, from
// another running request that holds or is computing it (then the request may have to wait, see
// take_resolved(): when the other has less left to compute up to the shared length than this one
// would compute without it), or from the host, disk and shared tiers — then advance() it as it is
// computed, and donate() its K/V as a device entry at the end (or release() it: dropped).
//
// Models whose memory cannot be cut back (recurrent, hybrid, window-only sliding window) resume
// only where their whole state exists: at a device entry's end, or at a checkpoint (their partial
// state after a prefix, taken at the positions next_stop() names) with the attention cells before
// it; they do not wait for other requests (prefix_cache_checkpoints.cpp, docs/design.md).
//
// Invariants (tests check each against the engine's cell count after every operation):
// - Shared in the tree means shared in the KV: entries of one namespace that share a prefix share
//   its cells, so the device cells (PrefixCacheProbe::device_cells()) are exactly the number of
//   cells the holders keep.
// - A running request that adopted cells from an entry locks them; locked cells are never given
//   up, and the idle cells (PrefixCacheProbe::idle_cells(): device cells - locked) are exactly
//   what release_device_cells() could free now.
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
#include "cache/cache_operations.h"
#include "cache/cache_tree.h"
#include "cache/cache_types.h"
#include "cache/kv_events.h"
#include "cache/request_life.h"
#include "engine/engine.h"

namespace prefixd::cache {

class PrefixCache final : public CacheAdmin, public CacheOperations, public RequestLife {
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

  // The owner's face (cache_operations.h).
  const CacheConfig& config() const override;
  ReuseMode reuse_mode() const override;
  CacheStats stats() const override;  // thread-safe
  ResetReport reset() override;
  ResetReport reset_scope(const ScopeId& scope) override;
  void record_kv_events(KvEventScopes scopes) override;
  std::vector<KvEvent> take_kv_events() override;

  // The request life (request_life.h).
  Ticket open(const RequestKey& key, std::span<const engine::Token> prompt, double seconds_per_token,
              std::function<void()> on_lookup_done) override;
  Ticket open_bypass(const ScopeId& scope) override;
  Admission admit(Ticket& ticket, engine::SeqId seq, const Room& room) override;
  void abandon(Ticket& ticket) override;
  std::int32_t reusable(Ticket& ticket) const override;
  std::vector<Resolved> take_resolved() override;
  void advance(engine::SeqId seq, std::int32_t computed) override;
  std::int32_t next_stop(engine::SeqId seq) const override;
  void donate(engine::SeqId seq, std::span<const engine::Token> tokens) override;
  void release(engine::SeqId seq) override;
  void make_room_for_step(std::int64_t running) override;
  std::int64_t spare_cells(std::int64_t running) const override;
  std::int64_t release_device_cells(std::int64_t cells) override;
  std::int64_t tick(bool nothing_running) override;

  // The admin face (cache_admin.h).
  CacheTree tree(const TreeQuery& query) const override;
  HeldPrefix held(const RequestKey& key, std::span<const engine::Token> tokens) const override;
  ResetReport forget(const RequestKey& key, std::span<const engine::Token> tokens, engine::Pos keep) override;
  ArtifactInfo save_artifact(const RequestKey& key, std::span<const engine::Token> tokens,
                             const std::filesystem::path& path, const std::string& manifest = {}) override;
  ArtifactInfo load_artifact(const std::filesystem::path& path, const ScopeId& scope = {},
                             const std::function<void(const Artifact&)>& admit = {}) override;
  CacheSummary summary(std::optional<std::uint64_t> since = std::nullopt, bool by_medium = false,
                       const std::optional<ScopeId>& scope = std::nullopt) override;
  std::vector<Digest> chain_of(const RequestKey& key, std::span<const engine::Token> prompt) const override;

 private:
  friend class PrefixCacheProbe;  // tests' and benchmarks' look inside (prefix_cache_probe.h)
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixd::cache
