#include "cache/key_paths.h"

#include <unordered_map>
#include <unordered_set>

namespace prefixd::cache {

using engine::SeqId;
using engine::Token;

namespace {

// Keys in the order first added, each once: a removal walk that adds what extends what it found.
class UniqueKeys {
 public:
  void add(const Digest& key) {
    if (seen_.insert(key).second) keys_.push_back(key);
  }
  std::size_t size() const { return keys_.size(); }
  Digest operator[](std::size_t i) const { return keys_[i]; }  // a copy: add() may grow the list
  const std::vector<Digest>& keys() const { return keys_; }

 private:
  std::vector<Digest> keys_;
  std::unordered_set<Digest, DigestHash> seen_;
};

}  // namespace

KeyPaths::KeyPaths(const Tiers& tiers) : tiers_(tiers) {}

KeyPaths::Rebuild KeyPaths::rebuildable(const RequestKey& key, const Lineage& lineage, std::span<const Token> tokens,
                                        Tier deepest) const {
  Rebuild out;
  if (!tiers_.family.keeps_cells() || tokens.empty()) return out;
  out.device = tiers_.device.match(lineage.ns, tokens, session_id(key), reach_of(key));
  const WalkTiers walk{.device = out.device.length,
                       .host = deepest >= Tier::host ? &tiers_.host.store() : nullptr,
                       .disk = deepest >= Tier::disk ? tiers_.backing.disk() : nullptr};
  out.pieces = walk_path(tiers_.host, tiers_.hasher, walk, lineage, tokens).pieces;
  return out;
}

KeptState KeyPaths::kept_state(const RequestKey& key, const Lineage& lineage, std::span<const Token> tokens,
                               std::span<const Digest> chain, std::int32_t limit, bool with_disk) const {
  return find_kept_state(tiers_.device, tiers_.checkpoints, tiers_.backing, lineage, session_id(key), reach_of(key),
                         tokens, chain, limit, with_disk);
}

HeldPrefix KeyPaths::held(const RequestKey& key, const Lineage& lineage, std::span<const engine::Token> tokens) const {
  HeldPrefix out;
  if (tokens.empty()) return out;
  const bool attention = tiers_.family.keeps_cells();
  if (attention) {
    out.device = rebuildable(key, lineage, tokens, Tier::device).reach();
    out.host = rebuildable(key, lineage, tokens, Tier::host).reach();
    out.disk = rebuildable(key, lineage, tokens, Tier::disk).reach();
  }
  out.tokens = out.disk;
  if (!tiers_.trimmable()) {
    const std::vector<Digest> chain = tiers_.hasher.chain(lineage, tokens);
    const KeptState kept =
        kept_state(key, lineage, tokens, chain, attention ? out.disk : static_cast<std::int32_t>(tokens.size()), true);
    out.tokens = kept.best();
    out.checkpoint = kept.checkpoint();
  }
  if (out.tokens < tiers_.config.min_prefix) out.tokens = 0;
  return out;
}

std::vector<Record> KeyPaths::gather_segments(const RequestKey& key, const Lineage& lineage,
                                                       std::span<const Token> tokens) {
  std::vector<Record> out;
  if (!tiers_.family.keeps_cells() || tokens.empty()) return out;
  const Rebuild rebuild = rebuildable(key, lineage, tokens, Tier::disk);
  const SeqId holder = rebuild.device.length > 0 ? tiers_.device.entry(rebuild.device.entry).holder : -1;
  const Digest ns_digest = digest_from(lineage.ns);
  auto record_of = [&](const HostTier::Cut& cut, engine::Bytes payload) {
    Record r;
    r.meta = RecordMeta{RecordKind::segment, tiers_.backing.model_key(), ns_digest, cut.key, cut.parent, cut.begin};
    r.meta.scope = key.scope;
    const auto part = tokens.subspan(static_cast<size_t>(cut.begin), static_cast<size_t>(cut.stop - cut.begin));
    r.meta.tokens.assign(part.begin(), part.end());
    r.payload = std::move(payload);
    return r;
  };
  // Only the cut's positions of a longer stored segment: restored aside, cut back, saved again.
  const auto cut_back = [&](const engine::Bytes& state, engine::Pos stop) {
    engine::Bytes out;
    if (tiers_.engine.restore_sequence(state, tiers_.device.scratch())) {
      tiers_.engine.remove_sequence(tiers_.device.scratch(), stop, -1);
      out = tiers_.engine.save_sequence(tiers_.device.scratch());
    }
    tiers_.engine.remove_sequence(tiers_.device.scratch(), 0, -1);
    return out;
  };
  for (const PathPiece& piece : rebuild.pieces) {
    const HostTier::Cut& cut = piece.cut;
    engine::Bytes payload;
    if (piece.from == PieceFrom::host) {
      const engine::Bytes& state = tiers_.host.store().peek(piece.stored)->state;
      payload = piece.part ? cut_back(state, cut.stop) : state;
    } else if (piece.from == PieceFrom::disk) {
      if (std::optional<Record> r = tiers_.backing.disk()->read(piece.stored); r && r->meta.begin == cut.begin) {
        payload = piece.part ? cut_back(r->payload, cut.stop) : std::move(r->payload);
      }
    } else {
      payload = tiers_.host.serialize(holder, cut.begin, cut.stop);
    }
    if (payload.empty()) break;  // a serialization or a read failed: the prefix ends here
    out.push_back(record_of(cut, std::move(payload)));
  }
  return out;
}

Artifact KeyPaths::build_artifact(const RequestKey& key, const Lineage& lineage, std::span<const engine::Token> tokens,
                                  const std::string& manifest) {
  const auto nothing = [&] {
    return ArtifactError(ArtifactError::Kind::nothing_cached,
                         "no prefix of at least " + std::to_string(tiers_.config.min_prefix) + " tokens of it is cached");
  };
  const bool attention = tiers_.family.keeps_cells();
  Artifact artifact{tiers_.backing.model_key(), digest_from(key.namespace_digest), key.scope, lineage.fork, lineage.salt};
  artifact.manifest = manifest;
  // The longest prefix the tiers rebuild exactly (held()); for checkpoint families, cut to the
  // highest position at or below it whose state is kept: a device entry's end, a checkpoint in
  // memory, or one on disk (promoted first, so its bytes are at hand).
  const engine::Pos reach = rebuildable(key, lineage, tokens, Tier::disk).reach();
  engine::Pos end = reach;
  Record checkpoint;
  if (!tiers_.trimmable()) {
    const auto limit = attention ? reach : static_cast<engine::Pos>(tokens.size());
    const std::vector<Digest> chain = tiers_.hasher.chain(lineage, tokens);
    KeptState kept = kept_state(key, lineage, tokens, chain, limit, false);
    if (tiers_.backing.promote_checkpoint(lineage, tokens, chain, kept.best(), limit, "", key.scope)) {
      kept = kept_state(key, lineage, tokens, chain, limit, false);
    }
    end = kept.best();
    engine::Pos window_from = 0;
    if (end > 0 && kept.memory.position == end) {
      checkpoint.payload = kept.memory.checkpoint->state;
      window_from = kept.memory.checkpoint->window_from;
    } else if (end > 0) {
      const DeviceEntry& entry = tiers_.device.entry(kept.entry);
      checkpoint.payload = tiers_.engine.save_checkpoint(entry.holder);
      window_from = entry.window_from;
    }
    if (checkpoint.payload.empty()) end = 0;
    checkpoint.meta = RecordMeta{RecordKind::checkpoint, tiers_.backing.model_key(), artifact.ns,
                                 checkpoint_record_key(tiers_.checkpoints.key_of(lineage, tokens, chain, end)), {}, end,
                                 window_from};
    checkpoint.meta.scope = key.scope;
  }
  std::vector<Record> records = gather_segments(key, lineage, tokens.first(static_cast<size_t>(end)));
  const engine::Pos covered =
      records.empty() ? 0 : records.back().meta.begin + static_cast<engine::Pos>(records.back().meta.tokens.size());
  if (attention && covered != end) end = tiers_.trimmable() ? covered : 0;  // a serialization or a read failed
  if (end < tiers_.config.min_prefix) throw nothing();
  if (!tiers_.trimmable()) records.push_back(std::move(checkpoint));
  artifact.tokens.assign(tokens.begin(), tokens.begin() + end);
  artifact.records = std::move(records);
  return artifact;
}

ArtifactInfo KeyPaths::adopt_artifact(Artifact& artifact, const ScopeId& scope,
                                      const std::function<void(const Artifact&)>& admit, HostStore::Evicted& evicted) {
  const Lineage lineage{digest_string(artifact.ns), artifact.fork, artifact.salt};
  const std::span<const Token> tokens(artifact.tokens);
  // Each record must sit where its tokens put it on this server's grid, under its own key.
  const std::vector<HostTier::Cut> cuts = tiers_.host.cuts(lineage, tokens, 0);
  const std::vector<Digest> chain = tiers_.hasher.chain(lineage, tokens);
  std::size_t next_cut = 0;
  const std::optional<HostTier::Cut> wall = tiers_.host.wall_cut(lineage, tokens);
  bool after_wall = false;  // nothing follows the wall segment
  for (const Record& r : artifact.records) {
    if (r.meta.kind == RecordKind::checkpoint) {
      if (tiers_.trimmable() || r.meta.key != checkpoint_record_key(tiers_.checkpoints.key_of(lineage, tokens, chain, r.meta.begin))) {
        throw ArtifactError(ArtifactError::Kind::corrupt, "a checkpoint of the artifact does not belong to its prefix");
      }
      continue;
    }
    const auto n = static_cast<engine::Pos>(r.meta.tokens.size());
    // The wall segment (HostTier::wall_cut) ends a prefix saved for another session than the wall's.
    if (wall && wall->begin == r.meta.begin && r.meta.parent == wall->parent && r.meta.key == wall->key &&
        tiers_.hasher.next(wall->parent, r.meta.tokens) == wall->key &&
        next_cut < cuts.size() && cuts[next_cut].begin == r.meta.begin && !after_wall) {
      after_wall = true;
      ++next_cut;
      continue;
    }
    const bool whole = !after_wall && next_cut < cuts.size() && cuts[next_cut].begin == r.meta.begin &&
                       r.meta.parent == cuts[next_cut].parent;
    const Digest expected = !whole ? Digest{}
                            : n == tiers_.host.segment_tokens() ? cuts[next_cut].key
                                                          : tiers_.hasher.next(cuts[next_cut].parent, r.meta.tokens);
    if (!whole || r.meta.key != expected) {
      throw ArtifactError(ArtifactError::Kind::corrupt,
                          "the artifact's segments do not match this server's segment grid (made with another "
                          "--prompt-cache-host-segment or --apc-block-size?) or were tampered with");
    }
    ++next_cut;
  }
  // The caller's last word, before any tier changes: a throw leaves everything as it was.
  if (admit) admit(artifact);
  ArtifactInfo info{static_cast<std::int32_t>(tokens.size())};
  info.manifest = artifact.manifest;
  info.token_ids = artifact.tokens;
  std::vector<Digest> keep;
  DiskStore::Job job;
  for (Record& r : artifact.records) {
    if (tiers_.backing.disk() != nullptr && !tiers_.backing.disk()->has(r.meta.key)) job.records.push_back(r);
    if (r.meta.kind == RecordKind::checkpoint) {
      if (tiers_.checkpoints.save(lineage, tokens, chain, std::move(r.payload), "", CheckpointKind::boundary,
                            r.meta.window_from, scope)) {
        info.checkpoints += 1;
      }
      continue;
    }
    const auto n = static_cast<std::int32_t>(r.meta.tokens.size());
    HostSegment segment{r.meta.begin, n, r.meta.parent, std::move(r.meta.tokens), std::move(r.payload), {}, scope};
    if (!tiers_.host.adopt(r.meta.key, std::move(segment), evicted, keep)) break;
    keep.push_back(r.meta.key);
    info.segments += 1;
  }
  // Deepest first, so a segment ends up less recently used than the prefix it extends (the host
  // tier's LRU order; inserting in position order made it the other way round).
  for (auto key = keep.rbegin(); key != keep.rend(); ++key) tiers_.host.store().touch(*key);
  if (tiers_.backing.disk() != nullptr && !job.records.empty()) tiers_.backing.disk()->enqueue(std::move(job));
  return info;
}

void KeyPaths::forget_stored(const Lineage& lineage, std::span<const engine::Token> tokens,
                             std::span<const Digest> chain, engine::Pos keep, ResetReport& report) {
  const auto n = static_cast<std::int32_t>(tokens.size());
  const std::string& ns = lineage.ns;
  // Host segments: those hanging off the path at a grid line at or past `keep` whose tokens agree
  // with the path past `keep`, then, transitively, the segments that extend a removed one (a
  // continuation of the path past its end). A segment that starts before `keep` holds positions
  // another key or module still needs (`keep` is what the path shares with them): it stays whole,
  // and so do the segments hanging off it that leave the path.
  const std::int32_t seg = tiers_.host.segment_tokens();
  const std::int32_t first_gone = (keep + seg - 1) / seg * seg;
  // What a span of the path from grid line `g` hangs off: unforked, and forked when it covers the
  // fork (both may exist: a span ending before the fork, one ending after it).
  auto parents_at = [&](std::int32_t g) {
    std::vector<Digest> out{tiers_.hasher.parent(lineage, chain, g, g + 1), tiers_.hasher.parent(lineage, chain, g, g + seg)};
    if (out[0] == out[1]) out.pop_back();
    return out;
  };
  // Keys whose segments extend a removed whole grid segment `key`.
  auto extensions_of = [&](const Digest& key_of_removed) {
    std::vector<Digest> out{key_of_removed};
    if (lineage.fork != kNoFork) out.push_back(tiers_.hasher.forked(key_of_removed, lineage.salt));
    return out;
  };
  auto on_path = [&](std::int32_t g, std::span<const Token> segment_tokens) {
    return g + common_prefix(segment_tokens, tokens.subspan(static_cast<size_t>(g))) > keep;
  };
  {
    HostStore& store = tiers_.host.store();
    const std::uint64_t before = store.bytes();
    UniqueKeys gone;
    auto add = [&](const Digest& k) { gone.add(k); };
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
    for (const Digest& k : gone.keys()) {
      store.erase(k);
      report.entries += 1;
    }
    report.bytes += before - store.bytes();
  }

  // Checkpoints of the path past `keep`, in memory and on disk.
  std::vector<Digest> checkpoint_keys;
  for (engine::Pos p : tiers_.checkpoints.positions(ns)) {
    if (p > keep && p <= n) checkpoint_keys.push_back(tiers_.checkpoints.key_of(lineage, tokens, chain, p));
  }
  const ScopeUsage checkpoints = tiers_.checkpoints.discard(checkpoint_keys);
  report.entries += checkpoints.entries;
  report.bytes += checkpoints.bytes;

  // Disk files: the same walk over the index, then the path's checkpoint files.
  if (tiers_.backing.disk() != nullptr) {
    UniqueKeys gone;
    auto add = [&](const Digest& k) { gone.add(k); };
    for (std::int32_t g = first_gone; g < n; g += seg) {
      for (const Digest& parent : parents_at(g)) {
        for (const Digest& k : tiers_.backing.disk()->children(parent, tokens[static_cast<size_t>(g)])) {
          const std::optional<RecordMeta> meta = tiers_.backing.disk()->meta(k);
          if (meta && meta->begin == g && on_path(g, meta->tokens)) add(k);
        }
      }
    }
    for (size_t i = 0; i < gone.size(); ++i) {
      const std::optional<RecordMeta> meta = tiers_.backing.disk()->meta(gone[i]);
      if (!meta || static_cast<std::int32_t>(meta->tokens.size()) != seg) continue;
      for (const Digest& parent : extensions_of(gone[i])) {
        for (const Digest& k : tiers_.backing.disk()->children(parent)) add(k);
      }
    }
    for (engine::Pos p : tiers_.backing.disk()->checkpoint_positions(digest_from(ns))) {
      if (p > keep && p <= n) add(checkpoint_record_key(tiers_.checkpoints.key_of(lineage, tokens, chain, p)));
    }
    const ScopeUsage files = tiers_.backing.disk()->erase(gone.keys());
    report.entries += files.entries;
    report.bytes += files.bytes;
  }
}

}  // namespace prefixd::cache
