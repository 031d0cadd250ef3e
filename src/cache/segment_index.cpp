#include "cache/segment_index.h"

#include <algorithm>

namespace prefixd::cache {

bool SegmentIndex::begins_at(const Digest& key, engine::Pos begin) const {
  const std::optional<Compared> stored = compare(key, {});
  return stored && stored->begin == begin;
}

Tail best_tail(const SegmentIndex& index, const BlockHasher& hasher, const Lineage& lineage,
               std::span<const Digest> chain, std::span<const engine::Token> query, engine::Pos pos) {
  const auto n = static_cast<std::int32_t>(query.size());
  Tail best;
  if (pos >= n) return best;
  const auto rest = query.subspan(static_cast<size_t>(pos));
  // The segments compared start at `pos` and reach past it, up to the query's end: forked when
  // they may cover the fork.
  const auto search = [&](const Digest& parent, std::int32_t cap) {
    for (const Digest& key : index.children(parent, rest.front())) {
      const std::optional<SegmentIndex::Compared> stored = index.compare(key, rest);
      if (!stored || stored->begin != pos) continue;
      const std::int32_t take = std::min(cap, stored->common);
      if (take > best.take) best = Tail{key, parent, take};
    }
  };
  search(hasher.parent(lineage, chain, pos, n), n - pos);
  if (lineage.forks_within(pos + 1, n)) search(hasher.parent(lineage, chain, pos, pos + 1), lineage.fork - pos);
  return best;
}

}  // namespace prefixd::cache
