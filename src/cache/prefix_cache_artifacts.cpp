// prefixd cache — saving a cached prefix to a named artifact and loading it back.
//
// A save gathers the prefix's attention segments from wherever they are (the host tier's bytes,
// a device entry's cells serialized now, or the disk tier's files) on the host tier's grid, so
// the records carry the same keys a lookup walks; checkpoint families add the state at the end.
// A load checks that every record's key is the one its tokens name in the artifact's namespace
// (checksums prove the bytes are the ones written, not that they belong where they claim), then
// stores them; a lookup finds them like any other host segment or checkpoint.
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

namespace {
constexpr std::size_t kRememberedSessions = 1024;
}  // namespace

void PrefixCache::Impl::remember_session(const RequestKey& key, std::span<const Token> tokens) {
  if (key.session.empty()) return;
  RequestKey kept = key;
  kept.boundaries.clear();
  session_prompts_[session_id(key)] = SessionPrompt{std::move(kept), {tokens.begin(), tokens.end()}, ++session_order_};
  if (session_prompts_.size() > kRememberedSessions) {
    auto oldest = std::ranges::min_element(session_prompts_, {}, [](const auto& kv) { return kv.second.order; });
    session_prompts_.erase(oldest);
  }
}

std::vector<Record> PrefixCache::Impl::gather_segments(const RequestKey& key, const Lineage& lineage,
                                                       std::span<const Token> tokens) {
  std::vector<Record> out;
  if (!engine::has_attention_cells(engine_.model()) || tokens.empty()) return out;
  refresh_window_entries();
  const Rebuild rebuild = rebuildable(key, lineage, tokens, Tier::disk);
  const SeqId holder = rebuild.device.length > 0 ? entries_.at(rebuild.device.entry).holder : -1;
  const Digest ns_digest = digest_from(lineage.ns);
  auto record_of = [&](const HostTier::Cut& cut, engine::Bytes payload) {
    Record r;
    r.meta = RecordMeta{RecordKind::segment, model_key_, ns_digest, cut.key, cut.parent, cut.begin};
    r.meta.scope = key.scope;
    const auto part = tokens.subspan(static_cast<size_t>(cut.begin), static_cast<size_t>(cut.stop - cut.begin));
    r.meta.tokens.assign(part.begin(), part.end());
    r.payload = std::move(payload);
    return r;
  };
  for (const Piece& piece : rebuild.pieces) {
    const HostTier::Cut& cut = piece.cut;
    engine::Bytes payload;
    if (piece.source == PieceFrom::host) {
      payload = host_.store().peek(cut.key)->state;
    } else if (piece.source == PieceFrom::host_covering) {
      // Only the cut's positions of the longer segment: restored aside, cut back, saved again.
      if (engine_.restore_sequence(host_.store().peek(piece.stored)->state, scratch_)) {
        engine_.remove_sequence(scratch_, cut.stop, -1);
        payload = engine_.save_sequence(scratch_);
      }
      engine_.remove_sequence(scratch_, 0, -1);
    } else if (piece.source == PieceFrom::disk) {
      if (std::optional<Record> r = disk_->read(cut.key); r && r->meta.begin == cut.begin) payload = std::move(r->payload);
    } else {
      payload = host_.serialize(holder, cut.begin, cut.stop);
    }
    if (payload.empty()) break;  // a serialization or a read failed: the prefix ends here
    out.push_back(record_of(cut, std::move(payload)));
  }
  return out;
}

ArtifactInfo PrefixCache::Impl::save_artifact(const RequestKey& key, std::span<const Token> tokens,
                                              const std::filesystem::path& path, const std::string& manifest) {
  const auto nothing = [&] {
    return ArtifactError(ArtifactError::Kind::nothing_cached,
                         "no prefix of at least " + std::to_string(config_.min_prefix) + " tokens of it is cached");
  };
  if (manifest.size() > kMaxArtifactManifestBytes) {
    throw std::invalid_argument("an artifact manifest of " + std::to_string(manifest.size()) +
                                " bytes is longer than the " + std::to_string(kMaxArtifactManifestBytes) + " allowed");
  }
  if (!can_reuse() || tokens.empty()) throw nothing();
  const Lineage lineage = lineage_of(key, ++next_order_);
  const bool attention = engine::has_attention_cells(engine_.model());
  Artifact artifact{model_key_, digest_from(key.namespace_digest), key.scope, lineage.fork, lineage.salt};
  artifact.manifest = manifest;
  refresh_window_entries();
  // The longest prefix the tiers rebuild exactly (held()); for checkpoint families, cut to the
  // highest position at or below it whose state is kept: a device entry's end, a checkpoint in
  // memory, or one on disk (promoted first, so its bytes are at hand).
  const engine::Pos reach = rebuildable(key, lineage, tokens, Tier::disk).reach();
  engine::Pos end = reach;
  Record checkpoint;
  if (!trimmable()) {
    const auto limit = attention ? reach : static_cast<engine::Pos>(tokens.size());
    const std::vector<Digest> chain = hasher_.chain(lineage, tokens);
    KeptState kept = kept_state(key, lineage, tokens, chain, limit, false);
    if (promote_checkpoint(lineage, tokens, chain, kept.best(), limit, "", key.scope)) {
      kept = kept_state(key, lineage, tokens, chain, limit, false);
    }
    end = kept.best();
    engine::Pos window_from = 0;
    if (end > 0 && kept.memory.position == end) {
      checkpoint.payload = kept.memory.checkpoint->state;
      window_from = kept.memory.checkpoint->window_from;
    } else if (end > 0) {
      const DeviceEntry& entry = entries_.at(kept.entry);
      checkpoint.payload = engine_.save_checkpoint(entry.holder);
      window_from = entry.window_from;
    }
    if (checkpoint.payload.empty()) end = 0;
    checkpoint.meta = RecordMeta{RecordKind::checkpoint, model_key_, artifact.ns,
                                 checkpoint_record_key(checkpoints_.key_of(lineage, tokens, chain, end)), {}, end,
                                 window_from};
    checkpoint.meta.scope = key.scope;
  }
  std::vector<Record> records = gather_segments(key, lineage, tokens.first(static_cast<size_t>(end)));
  const engine::Pos covered =
      records.empty() ? 0 : records.back().meta.begin + static_cast<engine::Pos>(records.back().meta.tokens.size());
  if (attention && covered != end) end = trimmable() ? covered : 0;  // a serialization or a read failed
  if (end < config_.min_prefix) throw nothing();
  if (!trimmable()) records.push_back(std::move(checkpoint));
  artifact.tokens.assign(tokens.begin(), tokens.begin() + end);
  artifact.records = std::move(records);
  publish();
  ArtifactInfo info = write_artifact(path, artifact);
  info.manifest = artifact.manifest;
  info.token_ids = std::move(artifact.tokens);
  return info;
}

ArtifactInfo PrefixCache::Impl::save_session_artifact(const ScopeId& scope, const std::string& session,
                                                      const std::filesystem::path& path, const std::string& manifest) {
  auto it = session_prompts_.find(session_id(RequestKey{.session = session, .scope = scope}));
  if (session.empty() || it == session_prompts_.end()) {
    throw ArtifactError(ArtifactError::Kind::nothing_cached, "nothing is cached for prompt_cache_key '" + session + "'");
  }
  const SessionPrompt prompt = it->second;  // save_artifact may update the map
  return save_artifact(prompt.key, prompt.tokens, path, manifest);
}

ArtifactInfo PrefixCache::Impl::load_artifact(const std::filesystem::path& path, const ScopeId& scope,
                                              const std::function<void(const Artifact&)>& admit) {
  Artifact artifact = read_artifact(path, model_key_);
  if (!can_reuse()) throw ArtifactError(ArtifactError::Kind::nothing_cached, "the prompt cache is off");
  if (artifact.scope != scope) {
    throw ArtifactError(ArtifactError::Kind::scope, "artifact " + path.filename().string() + " belongs to another tenant");
  }
  const Lineage lineage{digest_string(artifact.ns), artifact.fork, artifact.salt};
  const std::span<const Token> tokens(artifact.tokens);
  // Each record must sit where its tokens put it on this server's grid, under its own key.
  const std::vector<HostTier::Cut> cuts = host_.cuts(lineage, tokens, 0);
  const std::vector<Digest> chain = hasher_.chain(lineage, tokens);
  std::size_t next_cut = 0;
  const std::optional<HostTier::Cut> wall = host_.wall_cut(lineage, tokens);
  bool after_wall = false;  // nothing follows the wall segment
  for (const Record& r : artifact.records) {
    if (r.meta.kind == RecordKind::checkpoint) {
      if (trimmable() || r.meta.key != checkpoint_record_key(checkpoints_.key_of(lineage, tokens, chain, r.meta.begin))) {
        throw ArtifactError(ArtifactError::Kind::corrupt, "a checkpoint of the artifact does not belong to its prefix");
      }
      continue;
    }
    const auto n = static_cast<engine::Pos>(r.meta.tokens.size());
    // The wall segment (HostTier::wall_cut) ends a prefix saved for another session than the wall's.
    if (wall && wall->begin == r.meta.begin && r.meta.parent == wall->parent && r.meta.key == wall->key &&
        hasher_.next(wall->parent, r.meta.tokens) == wall->key &&
        next_cut < cuts.size() && cuts[next_cut].begin == r.meta.begin && !after_wall) {
      after_wall = true;
      ++next_cut;
      continue;
    }
    const bool whole = !after_wall && next_cut < cuts.size() && cuts[next_cut].begin == r.meta.begin &&
                       r.meta.parent == cuts[next_cut].parent;
    const Digest expected = !whole ? Digest{}
                            : n == host_.segment_tokens() ? cuts[next_cut].key
                                                          : hasher_.next(cuts[next_cut].parent, r.meta.tokens);
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
  HostStore::Evicted evicted;
  DiskStore::Job job;
  for (Record& r : artifact.records) {
    if (disk_ && !disk_->has(r.meta.key)) job.records.push_back(r);
    if (r.meta.kind == RecordKind::checkpoint) {
      if (checkpoints_.save(lineage, tokens, chain, std::move(r.payload), "", CheckpointKind::boundary,
                            r.meta.window_from, scope)) {
        info.checkpoints += 1;
      }
      continue;
    }
    const auto n = static_cast<std::int32_t>(r.meta.tokens.size());
    HostSegment segment{r.meta.begin, n, r.meta.parent, std::move(r.meta.tokens), std::move(r.payload), {}, scope};
    if (!host_.adopt(r.meta.key, std::move(segment), evicted, keep)) break;
    keep.push_back(r.meta.key);
    info.segments += 1;
  }
  // Deepest first, so a segment ends up less recently used than the prefix it extends (the host
  // tier's LRU order; inserting in position order made it the other way round).
  for (auto key = keep.rbegin(); key != keep.rend(); ++key) host_.store().touch(*key);
  add_evictions(evicted);
  if (disk_ && !job.records.empty()) disk_->enqueue(std::move(job));
  std::error_code ec;
  info.bytes = std::filesystem::file_size(path, ec);
  trace("artifact {}: {} tokens, {} segments, {} checkpoints loaded", path.filename().string(), info.tokens,
        info.segments, info.checkpoints);
  publish();
  return info;
}

}  // namespace prefixd::cache
