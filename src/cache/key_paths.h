// prefixd cache — a key's path through the tiers: where the records that rebuild a prefix of a
// token sequence lie, keyed exactly as the host tier, a disk file or a shared value keys them on
// the block grid (the one walk a restore takes too, path_walk.h; a part of a longer stored segment
// is carried cut back, as a record of exactly its tokens), what each tier holds of it, the artifact
// that carries it, and removing what the stores hold of it past a position.
//
// A path's holdings are found by content, as a lookup finds them: the device tree's entries that
// share its tokens, the host segments and disk files addressed by its block-hash chain (forked
// under the key's session salt past a session wall), and the checkpoints keyed by its prefixes.
// The queries write to no tier; build_artifact may promote a checkpoint from disk, adopt_artifact
// adopts what an artifact carries, forget_stored only removes.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "cache/artifact.h"
#include "cache/backing_tiers.h"
#include "cache/checkpoint_store.h"
#include "cache/device_tier.h"
#include "cache/host_tier.h"
#include "cache/kept_state.h"
#include "cache/path_walk.h"
#include "cache/tiers.h"

namespace prefixd::cache {

class KeyPaths {
 public:
  explicit KeyPaths(const Tiers& tiers);

  // Where the segments that rebuild the longest prefix of `tokens` exactly lie, on the host tier's
  // grid, using the tiers down to `deepest`: the one walk (walk_path) from position 0, so what a
  // key holds is what a restore reaches.
  struct Rebuild {
    std::vector<PathPiece> pieces;  // in position order; they tile [0, reach())
    RadixTree::Match device;        // the device tree's match (`key`'s reach)
    std::int32_t reach() const { return pieces.empty() ? 0 : pieces.back().cut.stop; }
  };
  Rebuild rebuildable(const RequestKey& key, const Lineage& lineage, std::span<const engine::Token> tokens,
                      Tier deepest) const;

  // Checkpoint families: where the state after a prefix of `tokens` no longer than `limit` is
  // kept (find_kept_state, for `key`).
  KeptState kept_state(const RequestKey& key, const Lineage& lineage, std::span<const engine::Token> tokens,
                       std::span<const Digest> chain, std::int32_t limit, bool with_disk) const;

  // What each tier holds of `tokens` under `lineage` (PrefixCache::held).
  HeldPrefix held(const RequestKey& key, const Lineage& lineage, std::span<const engine::Token> tokens) const;

  // The segments that rebuild the longest prefix of `tokens` from the device, host and disk tiers
  // (rebuildable()), serialized or read, in position order (their tokens tile [0, reach)).
  std::vector<Record> gather_segments(const RequestKey& key, const Lineage& lineage,
                                      std::span<const engine::Token> tokens);

  // The artifact of the longest prefix of `tokens` the tiers rebuild exactly (for checkpoint
  // families, ending where a state is kept). Throws ArtifactError(nothing_cached) below min_prefix.
  Artifact build_artifact(const RequestKey& key, const Lineage& lineage, std::span<const engine::Token> tokens,
                          const std::string& manifest);
  // Checks that every record of `artifact` sits where its tokens put it on this server's grid,
  // under its own key (throws ArtifactError(corrupt) otherwise), calls `admit` (a throw there
  // leaves every tier unchanged), then adopts the records into the host tier, the checkpoint store
  // and behind them the disk. `evicted`: what the adoption pushed out of the host tier.
  ArtifactInfo adopt_artifact(Artifact& artifact, const ScopeId& scope,
                              const std::function<void(const Artifact&)>& admit, HostStore::Evicted& evicted);

  // Removes what the host tier, the checkpoint store and the disk hold of `tokens` past `keep`
  // (segments on the path, then those extending a removed one), adding to `report`.
  void forget_stored(const Lineage& lineage, std::span<const engine::Token> tokens, std::span<const Digest> chain,
                     engine::Pos keep, ResetReport& report);

 private:
  Tiers tiers_;
};

}  // namespace prefixd::cache
