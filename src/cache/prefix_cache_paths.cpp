// prefixd cache — a key's path: what the tiers hold of a token prefix (held(), and the walk that
// save_artifact gathers along), and removing what they hold of it past a position (forget()).
//
// A path's holdings are found by content, as a lookup finds them: the device tree's entries that
// share its tokens, the host segments and disk files addressed by its block-hash chain (forked
// under the key's session salt past a session wall), and the checkpoints keyed by its prefixes.
// Nothing here writes to a tier except forget(), and forget() only removes.
#include <unordered_map>
#include <unordered_set>

#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

PrefixCache::Impl::Rebuild PrefixCache::Impl::rebuildable(const RequestKey& key, const Lineage& lineage,
                                                         std::span<const Token> tokens, Tier deepest) const {
  Rebuild out;
  if (!engine::has_attention_cells(engine_.model()) || tokens.empty()) return out;
  if (auto tree = trees_.find(lineage.ns); tree != trees_.end()) {
    out.device = tree->second.match(tokens, session_id(key), reach_of(key));
  }
  const std::int32_t on_device = out.device.length;
  for (const HostTier::Cut& cut : host_.cuts(lineage, tokens, 0)) {
    const HostSegment* segment = deepest >= Tier::host ? host_.store().peek(cut.key) : nullptr;
    if (segment != nullptr && segment->begin == cut.begin) {
      out.pieces.push_back({cut, PieceFrom::host});
      continue;
    }
    if (on_device >= cut.stop) {
      out.pieces.push_back({cut, PieceFrom::device});
      continue;
    }
    // A tail whose tokens begin a longer stored sibling: a lookup finds it there (token comparison).
    if (deepest >= Tier::host && cut.stop - cut.begin < host_.segment_tokens()) {
      const auto part = tokens.subspan(static_cast<size_t>(cut.begin), static_cast<size_t>(cut.stop - cut.begin));
      const HostStore& store = host_.store();
      const std::vector<Digest> siblings = store.children(cut.parent, part.front());
      const auto covering = std::ranges::find_if(siblings, [&](const Digest& k) {
        const HostSegment* s = store.peek(k);
        return s != nullptr && s->begin == cut.begin && s->token_ids.size() > part.size() &&
               std::ranges::equal(part, std::span<const Token>(s->token_ids).first(part.size()));
      });
      if (covering != siblings.end()) {
        out.pieces.push_back({cut, PieceFrom::host_covering, *covering});
        break;  // a tail ends the path
      }
    }
    if (deepest >= Tier::disk && disk_) {
      if (const std::optional<RecordMeta> meta = disk_->meta(cut.key); meta && meta->begin == cut.begin) {
        out.pieces.push_back({cut, PieceFrom::disk});
        continue;
      }
    }
    // Nothing holds the whole segment. Where it straddles the session wall, the wall segment
    // holds its part before the wall (HostTier::wall_cut), unless the device's cells reach as far.
    if (const std::optional<HostTier::Cut> wall = host_.wall_cut(lineage, tokens);
        wall && wall->begin == cut.begin && on_device < wall->stop) {
      const HostSegment* segment = deepest >= Tier::host ? host_.store().peek(wall->key) : nullptr;
      if (segment != nullptr && segment->begin == wall->begin) {
        out.pieces.push_back({*wall, PieceFrom::host});
        break;
      }
      if (deepest >= Tier::disk && disk_) {
        if (const std::optional<RecordMeta> meta = disk_->meta(wall->key); meta && meta->begin == wall->begin) {
          out.pieces.push_back({*wall, PieceFrom::disk});
          break;
        }
      }
    }
    // The device's cells may hold its start (a shorter tail).
    if (on_device > cut.begin) {
      const auto head = tokens.subspan(static_cast<size_t>(cut.begin), static_cast<size_t>(on_device - cut.begin));
      out.pieces.push_back({HostTier::Cut{cut.begin, on_device, cut.parent, hasher_.next(cut.parent, head)},
                            PieceFrom::device_head});
    }
    break;
  }
  return out;
}

std::vector<engine::Pos> PrefixCache::Impl::disk_checkpoints(const Lineage& lineage, std::span<const Token> query,
                                                             std::span<const Digest> chain, std::int32_t have,
                                                             std::int32_t limit) const {
  std::vector<engine::Pos> out;
  if (!disk_) return out;
  const std::vector<engine::Pos> positions = disk_->checkpoint_positions(digest_from(lineage.ns));
  for (auto p = positions.rbegin(); p != positions.rend(); ++p) {
    if (*p > limit || *p > static_cast<engine::Pos>(query.size())) continue;
    if (*p <= have || *p < config_.min_prefix) break;
    const Digest key = checkpoints_.key_of(lineage, query, chain, *p);
    if (checkpoints_.contains(key) || !disk_->meta(checkpoint_record_key(key))) continue;
    if (out.empty() || out.back() != *p) out.push_back(*p);
  }
  return out;
}

PrefixCache::Impl::KeptState PrefixCache::Impl::kept_state(const RequestKey& key, const Lineage& lineage,
                                                           std::span<const Token> tokens, std::span<const Digest> chain,
                                                           std::int32_t limit, bool with_disk) const {
  KeptState out;
  limit = std::min(limit, static_cast<std::int32_t>(tokens.size()));
  if (limit <= 0) return out;
  if (auto tree = trees_.find(lineage.ns); tree != trees_.end()) {
    const RadixTree::Match whole =
        tree->second.match_whole(tokens.first(static_cast<size_t>(limit)), session_id(key), reach_of(key));
    if (whole.length > 0 && entries_.at(whole.entry).state_at_end) {
      out.entry_end = whole.length;
      out.entry = whole.entry;
    }
  }
  out.memory = checkpoints_.find(lineage, tokens, chain, limit);
  if (with_disk) {
    const std::vector<engine::Pos> on_disk =
        disk_checkpoints(lineage, tokens, chain, std::max(out.entry_end, out.memory.position), limit);
    if (!on_disk.empty()) out.disk = on_disk.front();
  }
  return out;
}

HeldPrefix PrefixCache::Impl::held(const RequestKey& key, std::span<const Token> tokens) const {
  HeldPrefix out;
  if (!can_reuse() || tokens.empty()) return out;
  // The order only salts a key without a session under a session wall: nothing past the wall is
  // addressed under a salt no request has had yet.
  const Lineage lineage = lineage_of(key, next_order_ + 1);
  const bool attention = engine::has_attention_cells(engine_.model());
  if (attention) {
    out.device = rebuildable(key, lineage, tokens, Tier::device).reach();
    out.host = rebuildable(key, lineage, tokens, Tier::host).reach();
    out.disk = rebuildable(key, lineage, tokens, Tier::disk).reach();
  }
  out.tokens = out.disk;
  if (!trimmable()) {
    const std::vector<Digest> chain = hasher_.chain(lineage, tokens);
    const KeptState kept =
        kept_state(key, lineage, tokens, chain, attention ? out.disk : static_cast<std::int32_t>(tokens.size()), true);
    out.tokens = kept.best();
    out.checkpoint = kept.checkpoint();
  }
  if (out.tokens < config_.min_prefix) out.tokens = 0;
  return out;
}

ResetReport PrefixCache::Impl::forget(const RequestKey& key, std::span<const Token> tokens, engine::Pos keep) {
  ResetReport report;
  const auto n = static_cast<std::int32_t>(tokens.size());
  keep = std::max<engine::Pos>(0, keep);
  if (!can_reuse() || keep >= n) return report;
  refresh_window_entries();
  flush_disk();  // what is queued for this path is on disk, indexed, and removed below
  const std::string& ns = key.namespace_digest;
  const Lineage lineage = lineage_of(key, next_order_ + 1);
  const std::vector<Digest> chain = hasher_.chain(lineage, tokens);
  const bool attention = engine::has_attention_cells(engine_.model());
  const std::uint64_t device_before = device_bytes();

  // Device: every entry `key` could reuse more than `keep` tokens of along the path. An entry that
  // shares the path only up to `keep` (another key's) is not touched, and cutting the others never
  // frees a cell it uses (RadixTree::keep_length).
  if (auto tree = trees_.find(ns); tree != trees_.end()) {
    const std::string session = session_id(key);
    const Reach reach = reach_of(key);
    std::vector<EntryId> on_path;
    for (const auto& [id, e] : entries_) {
      if (e.lineage.ns != ns) continue;
      std::int32_t shared = common_prefix(e.tokens, tokens);
      if (!(reach.own && e.session == session)) shared = std::min(shared, reach.others);
      if (shared > keep) on_path.push_back(id);
    }
    std::ranges::sort(on_path);
    const std::int32_t target = trimmable() && keep >= config_.min_prefix ? keep : 0;
    for (EntryId id : on_path) {
      DeviceEntry& e = entries_.at(id);
      const RadixTree& t = trees_.at(ns);
      const auto length = static_cast<std::int32_t>(e.tokens.size());
      const std::int32_t others = t.keep_length(id);  // what other entries and running requests use
      if (t.locked_length(id) > target) report.locked_entries += 1;
      // A state without attention cells cannot be cut back: an entry running requests use stays.
      if (!attention && others > 0 && !t.shared_with_another(id, others)) continue;
      cut_back(e, target);
      const auto kept = entries_.find(id);
      if (kept == entries_.end() || static_cast<std::int32_t>(kept->second.tokens.size()) < length) report.entries += 1;
    }
    repin(ns);
  }
  report.bytes += device_before - device_bytes();

  // Host segments: those hanging off the path at a grid line at or past `keep` whose tokens agree
  // with the path past `keep`, then, transitively, the segments that extend a removed one (a
  // continuation of the path past its end). A segment that starts before `keep` holds positions
  // another key or module still needs (`keep` is what the path shares with them): it stays whole,
  // and so do the segments hanging off it that leave the path.
  const std::int32_t seg = host_.segment_tokens();
  const std::int32_t first_gone = (keep + seg - 1) / seg * seg;
  // What a span of the path from grid line `g` hangs off: unforked, and forked when it covers the
  // fork (both may exist: a span ending before the fork, one ending after it).
  auto parents_at = [&](std::int32_t g) {
    std::vector<Digest> out{hasher_.parent(lineage, chain, g, g + 1), hasher_.parent(lineage, chain, g, g + seg)};
    if (out[0] == out[1]) out.pop_back();
    return out;
  };
  // Keys whose segments extend a removed whole grid segment `key`.
  auto extensions_of = [&](const Digest& key_of_removed) {
    std::vector<Digest> out{key_of_removed};
    if (lineage.fork != kNoFork) out.push_back(hasher_.forked(key_of_removed, lineage.salt));
    return out;
  };
  auto on_path = [&](std::int32_t g, std::span<const Token> segment_tokens) {
    return g + common_prefix(segment_tokens, tokens.subspan(static_cast<size_t>(g))) > keep;
  };
  {
    HostStore& store = host_.store();
    const std::uint64_t before = store.bytes();
    std::vector<Digest> gone;
    std::unordered_set<Digest, DigestHash> seen;
    auto add = [&](const Digest& k) {
      if (seen.insert(k).second) gone.push_back(k);
    };
    for (std::int32_t g = first_gone; g < n; g += seg) {
      for (const Digest& parent : parents_at(g)) {
        for (const Digest& k : store.children(parent, tokens[static_cast<size_t>(g)])) {
          const HostSegment* s = store.peek(k);
          if (s != nullptr && s->begin == g && on_path(g, s->token_ids)) add(k);
        }
      }
    }
    std::unordered_multimap<Digest, Digest, DigestHash> by_parent;  // built once, when needed
    for (size_t i = 0; i < gone.size(); ++i) {
      const HostSegment* s = store.peek(gone[i]);
      if (s == nullptr || s->tokens != seg) continue;  // only whole grid segments are extended
      if (by_parent.empty()) {
        for (const auto& [parent, k] : store.parent_links()) by_parent.emplace(parent, k);
      }
      for (const Digest& parent : extensions_of(gone[i])) {
        auto [first, last] = by_parent.equal_range(parent);
        for (auto it = first; it != last; ++it) add(it->second);
      }
    }
    for (const Digest& k : gone) {
      store.erase(k);
      report.entries += 1;
    }
    report.bytes += before - store.bytes();
  }

  // Checkpoints of the path past `keep`, in memory and on disk.
  std::vector<Digest> checkpoint_keys;
  for (engine::Pos p : checkpoints_.positions(ns)) {
    if (p > keep && p <= n) checkpoint_keys.push_back(checkpoints_.key_of(lineage, tokens, chain, p));
  }
  const ScopeUsage checkpoints = checkpoints_.discard(checkpoint_keys);
  report.entries += checkpoints.entries;
  report.bytes += checkpoints.bytes;

  // Disk files: the same walk over the index, then the path's checkpoint files.
  if (disk_) {
    std::vector<Digest> gone;
    std::unordered_set<Digest, DigestHash> seen;
    auto add = [&](const Digest& k) {
      if (seen.insert(k).second) gone.push_back(k);
    };
    for (std::int32_t g = first_gone; g < n; g += seg) {
      for (const Digest& parent : parents_at(g)) {
        for (const Digest& k : disk_->children(parent, tokens[static_cast<size_t>(g)])) {
          const std::optional<RecordMeta> meta = disk_->meta(k);
          if (meta && meta->begin == g && on_path(g, meta->tokens)) add(k);
        }
      }
    }
    for (size_t i = 0; i < gone.size(); ++i) {
      const std::optional<RecordMeta> meta = disk_->meta(gone[i]);
      if (!meta || static_cast<std::int32_t>(meta->tokens.size()) != seg) continue;
      for (const Digest& parent : extensions_of(gone[i])) {
        for (const Digest& k : disk_->children(parent)) add(k);
      }
    }
    for (engine::Pos p : disk_->checkpoint_positions(digest_from(ns))) {
      if (p > keep && p <= n) add(checkpoint_record_key(checkpoints_.key_of(lineage, tokens, chain, p)));
    }
    const ScopeUsage files = disk_->erase(gone);
    report.entries += files.entries;
    report.bytes += files.bytes;
  }
  trace("forget: {} tokens past {}: {} entries, {} bytes ({} entries kept locked)", n, keep, report.entries,
        report.bytes, report.locked_entries);
  publish();
  return report;
}

}  // namespace prefixd::cache
