// prefixd cache — the admin face of the prompt cache: what the control plane, the cache views and
// the web UI may ask of it (held, forget, artifacts, summary, tree, chain). The request life
// (request_life.h) is the scheduler's alone and is not part of this face, nor are what only the
// cache's owner does (cache_operations.h: reset, stats, KV events); the scheduler hands this face,
// never the cache itself, to whoever asks (Scheduler::ask_cache), and runs each question on its
// thread between batches.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/artifact.h"
#include "cache/cache_tree.h"
#include "cache/cache_types.h"

namespace prefixd::cache {

class CacheAdmin {
 public:
  // The tiers' holdings as one radix tree per namespace, for people to browse (cache_tree.h).
  // A pure query: no counter, LRU order or tier changes.
  virtual CacheTree tree(const TreeQuery& query) const = 0;

  // A key's path (the control plane: a key names a token prefix). held() is a pure query: no
  // counter, LRU order, tier or file changes.
  virtual HeldPrefix held(const RequestKey& key, std::span<const engine::Token> tokens) const = 0;
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
  virtual ResetReport forget(const RequestKey& key, std::span<const engine::Token> tokens, engine::Pos keep) = 0;

  // Artifacts (artifact.h). Saves the longest prefix of `tokens` the tiers can rebuild exactly and
  // `key` may reuse (held().tokens) — for checkpoint families, up to the highest position whose
  // state is kept — to `path`, with `manifest` in its header. Throws ArtifactError (nothing_cached
  // when no prefix of at least min_prefix tokens is held, io), std::invalid_argument when the
  // manifest is longer than kMaxArtifactManifestBytes (nothing written).
  virtual ArtifactInfo save_artifact(const RequestKey& key, std::span<const engine::Token> tokens,
                                     const std::filesystem::path& path, const std::string& manifest = {}) = 0;
  // Verifies a whole artifact, then calls `admit` (when given) with it, then stores its records in
  // the host tier and the checkpoint store (and behind them on disk). A refused artifact
  // (ArtifactError; `scope` when it belongs to another scope than `scope`) changes nothing, and
  // neither does one `admit` throws for: its exception propagates. The result carries the
  // artifact's manifest and tokens.
  virtual ArtifactInfo load_artifact(const std::filesystem::path& path, const ScopeId& scope = {},
                                     const std::function<void(const Artifact&)>& admit = {}) = 0;

  // The holdings summary; with `since` equal to the current version only the version comes back
  // (unchanged). Per-segment chains are memoized (segments never change), so a repeated call
  // hashes only what is new. With `by_medium`, each tier's blocks too (CacheSummary::by_medium), of
  // every scope or of `scope` alone.
  virtual CacheSummary summary(std::optional<std::uint64_t> since = std::nullopt, bool by_medium = false,
                               const std::optional<ScopeId>& scope = std::nullopt) = 0;
  // The chain hashes of `prompt`'s whole blocks as this cache addresses them for `key` (its
  // namespace, forked at the key's shared prefix for its session): what summary() lists once the
  // prompt is held. A pure query.
  virtual std::vector<Digest> chain_of(const RequestKey& key, std::span<const engine::Token> prompt) const = 0;

 protected:
  ~CacheAdmin() = default;
};

}  // namespace prefixd::cache
