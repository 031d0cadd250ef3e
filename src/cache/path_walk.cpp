#include "cache/path_walk.h"

namespace prefixd::cache {

PathWalk walk_path(const HostTier& grid, const BlockHasher& hasher, const WalkTiers& tiers, const Lineage& lineage,
                   std::span<const engine::Token> tokens) {
  PathWalk out;
  const auto n = static_cast<std::int32_t>(tokens.size());
  if (n == 0) return out;
  out.chain = hasher.chain(lineage, tokens);
  const std::vector<Digest>& chain = out.chain;
  const bool cells = !tiers.after_device_part;
  const std::vector<HostTier::Cut> cuts =
      grid.cuts(lineage, tokens, chain, tiers.after_device_part ? std::min(tiers.device, n - 1) : 0);
  out.start = cuts.front().begin;
  const auto whole = [](const HostTier::Cut& cut, PieceFrom from) { return PathPiece{cut, from, cut.key, false}; };
  for (const HostTier::Cut& cut : cuts) {
    if (tiers.host != nullptr && tiers.host->begins_at(cut.key, cut.begin)) {
      out.pieces.push_back(whole(cut, PieceFrom::host));
      continue;
    }
    if (cells && tiers.device >= cut.stop) {
      out.pieces.push_back(whole(cut, PieceFrom::device));
      continue;
    }
    if (tiers.disk != nullptr && tiers.disk->begins_at(cut.key, cut.begin)) {
      out.pieces.push_back(whole(cut, PieceFrom::disk));
      continue;
    }
    // No tier holds the segment whole: the path ends with the longest part one holds of the rest.
    // The device's cells first (a copy is cheaper than cutting a stored segment back), then a
    // stored segment that shares more tokens.
    const auto part_of = [&](const Digest& parent, std::int32_t take) {
      const auto span = tokens.subspan(static_cast<size_t>(cut.begin), static_cast<size_t>(take));
      const Digest key = take == grid.segment_tokens() ? cut.key : hasher.next(parent, span);
      return HostTier::Cut{cut.begin, cut.begin + take, parent, key};
    };
    PathPiece best;
    std::int32_t take = 0;
    if (cells && tiers.device > cut.begin) {
      take = tiers.device - cut.begin;
      best = whole(part_of(cut.parent, take), PieceFrom::device);
    }
    for (const auto& [index, from] : {std::pair{tiers.host, PieceFrom::host}, std::pair{tiers.disk, PieceFrom::disk}}) {
      if (index == nullptr) continue;
      const Tail tail = best_tail(*index, hasher, lineage, chain, tokens, cut.begin);
      if (tail.take <= take) continue;
      take = tail.take;
      const HostTier::Cut piece = part_of(tail.parent, take);
      best = PathPiece{piece, from, tail.key, tail.key != piece.key};
    }
    if (take > 0) out.pieces.push_back(best);
    break;
  }
  return out;
}

HostTier::Plan as_host_plan(const HostTier& host, const BlockHasher& hasher, const PathWalk& walk) {
  HostTier::Plan plan;
  if (host.store().size() == 0) return plan;
  plan.start = plan.length = walk.start;
  for (const PathPiece& piece : walk.pieces) {
    if (piece.from != PieceFrom::host) break;
    plan.keys.push_back(piece.stored);
    plan.last_take = piece.length();
    plan.length = piece.cut.stop;
  }
  // The stored grid segments of the device's part, nearest first: a restore touches them too.
  const std::int32_t block = hasher.block_size();
  const std::vector<Digest>& chain = walk.chain;
  for (std::int32_t end = walk.start; end >= host.segment_tokens(); end -= host.segment_tokens()) {
    const Digest& key = chain[static_cast<size_t>(end / block) - 1];
    if (host.store().contains(key)) plan.ancestors.push_back(key);
  }
  return plan;
}

}  // namespace prefixd::cache
