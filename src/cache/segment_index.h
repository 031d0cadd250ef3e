// prefixd cache — what the host store and the disk store have in common as indexes of a key's
// path: what is stored under a segment key (where it begins, how its tokens compare with a
// prompt's), and the keys stored under a parent key that begin with a token. The one walk over a
// path (walk_path, path_walk.h) takes this interface, so the search for a tail and the session
// fork's rule for it are written once, here.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cache/block_hash.h"
#include "engine/types.h"

namespace prefixd::cache {

class SegmentIndex {
 public:
  // A stored segment compared with a prompt's tokens from its start.
  struct Compared {
    engine::Pos begin = 0;     // its first position
    std::int32_t length = 0;   // its tokens
    std::int32_t common = 0;   // the tokens it shares with the compared span, from its start
  };
  // The segment stored under `key` compared with `rest` (nullopt: none). Reads only.
  virtual std::optional<Compared> compare(const Digest& key, std::span<const engine::Token> rest) const = 0;
  // The keys stored under `parent` whose tokens begin with `first`.
  virtual std::vector<Digest> children(const Digest& parent, engine::Token first) const = 0;

  // Whether a segment is stored under `key` and begins at `begin`.
  bool begins_at(const Digest& key, engine::Pos begin) const;

 protected:
  ~SegmentIndex() = default;
};

// The part of a stored segment a path takes where its grid walk stopped: `take` tokens of the
// segment under `key`, which hangs off `parent`.
struct Tail {
  Digest key{};
  Digest parent{};
  std::int32_t take = 0;
};

// The stored segment beginning at `pos` that shares the most tokens with the rest of `query`
// (ties: the first found). The session fork's rule: past the fork only the lineage's own
// (salted) segments count; before it, the namespace's segments there hold the shared prefix too
// (a wall segment, or another session's), and any session may take them up to the fork, never
// past it. `chain` is `query`'s chain in `lineage`. take == 0: none.
Tail best_tail(const SegmentIndex& index, const BlockHasher& hasher, const Lineage& lineage,
               std::span<const Digest> chain, std::span<const engine::Token> query, engine::Pos pos);

}  // namespace prefixd::cache
