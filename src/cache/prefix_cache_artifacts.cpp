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
  RadixTree::Match device;
  if (auto tree = trees_.find(lineage.ns); tree != trees_.end()) {
    device = tree->second.match(tokens, session_id(key), reach_of(key));
  }
  const SeqId holder = device.length > 0 ? entries_.at(device.entry).holder : -1;
  const Digest ns_digest = digest_from(lineage.ns);
  auto record_of = [&](const HostTier::Cut& cut, std::span<const Token> part, engine::Bytes payload) {
    Record r;
    r.meta = RecordMeta{RecordKind::segment, model_key_, ns_digest, cut.key, cut.parent, cut.begin};
    r.meta.scope = key.scope;
    r.meta.tokens.assign(part.begin(), part.end());
    r.payload = std::move(payload);
    return r;
  };
  for (const HostTier::Cut& cut : host_.cuts(lineage, tokens, 0)) {
    const auto part = tokens.subspan(static_cast<size_t>(cut.begin), static_cast<size_t>(cut.stop - cut.begin));
    if (const HostSegment* s = host_.store().peek(cut.key); s != nullptr && s->begin == cut.begin) {
      out.push_back(record_of(cut, part, s->state));
      continue;
    }
    if (device.length >= cut.stop) {
      engine::Bytes state = host_.serialize(holder, cut.begin, cut.stop);
      if (state.empty()) break;
      out.push_back(record_of(cut, part, std::move(state)));
      continue;
    }
    if (disk_ && disk_->meta(cut.key)) {
      if (std::optional<Record> r = disk_->read(cut.key); r && r->meta.begin == cut.begin) {
        out.push_back(record_of(cut, part, std::move(r->payload)));
        continue;
      }
    }
    // Nothing holds the whole segment: the device's cells may hold its start (a shorter tail).
    if (device.length > cut.begin) {
      const auto head = part.first(static_cast<size_t>(device.length - cut.begin));
      const HostTier::Cut tail{cut.begin, device.length, cut.parent, hasher_.next(cut.parent, head)};
      if (engine::Bytes state = host_.serialize(holder, cut.begin, device.length); !state.empty()) {
        out.push_back(record_of(tail, head, std::move(state)));
      }
    }
    break;
  }
  return out;
}

ArtifactInfo PrefixCache::Impl::save_artifact(const RequestKey& key, std::span<const Token> tokens,
                                              const std::filesystem::path& path) {
  const auto nothing = [&] {
    return ArtifactError(ArtifactError::Kind::nothing_cached,
                         "no prefix of at least " + std::to_string(config_.min_prefix) + " tokens of it is cached");
  };
  if (!can_reuse() || tokens.empty()) throw nothing();
  const std::string& ns = key.namespace_digest;
  const Lineage lineage = lineage_of(key, ++next_order_);
  const std::string session = session_id(key);
  Artifact artifact{model_key_, digest_from(ns), key.scope, lineage.fork, lineage.salt};
  std::vector<Record> segments = gather_segments(key, lineage, tokens);
  const auto reach = segments.empty() ? 0 : segments.back().meta.begin + static_cast<engine::Pos>(segments.back().meta.tokens.size());
  engine::Pos end = reach;
  if (!trimmable()) {
    // The highest position at or below what the attention segments reach whose state is kept:
    // a device entry's end, a checkpoint in memory, or one on disk.
    const bool attention = engine::has_attention_cells(engine_.model());
    const auto limit = attention ? reach : static_cast<engine::Pos>(tokens.size());
    const std::vector<Digest> chain = hasher_.chain(lineage, tokens);
    engine::Bytes state;
    engine::Pos window_from = 0;
    end = 0;
    if (auto tree = trees_.find(ns); tree != trees_.end()) {
      const RadixTree::Match whole =
          tree->second.match_whole(tokens.first(static_cast<size_t>(limit)), session, reach_of(key));
      if (whole.length > 0 && entries_.at(whole.entry).state_at_end) {
        end = whole.length;
        state = engine_.save_checkpoint(entries_.at(whole.entry).holder);
        window_from = entries_.at(whole.entry).window_from;
      }
    }
    CheckpointStore::Found found = checkpoints_.find(lineage, tokens, chain, limit);
    if (promote_checkpoint(lineage, tokens, chain, std::max(end, found.position), limit, "", key.scope)) {
      found = checkpoints_.find(lineage, tokens, chain, limit);
    }
    if (found.position > end) {
      end = found.position;
      state = found.checkpoint->state;
      window_from = found.checkpoint->window_from;
    }
    if (end > 0 && !state.empty()) {
      // Segments up to the state's position only: the last one is cut there.
      std::erase_if(segments, [&](const Record& r) { return r.meta.begin >= end; });
      if (!segments.empty() && segments.back().meta.begin + static_cast<engine::Pos>(segments.back().meta.tokens.size()) > end) {
        segments.pop_back();
        std::vector<Record> rest = gather_segments(key, lineage, tokens.first(static_cast<size_t>(end)));
        segments = std::move(rest);
      }
      const auto covered = segments.empty() ? 0 : segments.back().meta.begin + static_cast<engine::Pos>(segments.back().meta.tokens.size());
      if (attention && covered != end) end = 0;
      if (end > 0) {
        Record checkpoint;
        checkpoint.meta = RecordMeta{RecordKind::checkpoint, model_key_, artifact.ns,
                                     checkpoint_record_key(checkpoints_.key_of(lineage, tokens, chain, end)), {}, end,
                                     window_from};
        checkpoint.meta.scope = key.scope;
        checkpoint.payload = std::move(state);
        segments.push_back(std::move(checkpoint));
      }
    } else {
      end = 0;
    }
    if (!attention) std::erase_if(segments, [](const Record& r) { return r.meta.kind == RecordKind::segment; });
  }
  if (end < config_.min_prefix) throw nothing();
  artifact.tokens.assign(tokens.begin(), tokens.begin() + end);
  artifact.records = std::move(segments);
  publish();
  return write_artifact(path, artifact);
}

ArtifactInfo PrefixCache::Impl::save_session_artifact(const ScopeId& scope, const std::string& session,
                                                      const std::filesystem::path& path) {
  auto it = session_prompts_.find(session_id(RequestKey{.session = session, .scope = scope}));
  if (session.empty() || it == session_prompts_.end()) {
    throw ArtifactError(ArtifactError::Kind::nothing_cached, "nothing is cached for prompt_cache_key '" + session + "'");
  }
  const SessionPrompt prompt = it->second;  // save_artifact may update the map
  return save_artifact(prompt.key, prompt.tokens, path);
}

ArtifactInfo PrefixCache::Impl::load_artifact(const std::filesystem::path& path, const ScopeId& scope) {
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
  for (const Record& r : artifact.records) {
    if (r.meta.kind == RecordKind::checkpoint) {
      if (trimmable() || r.meta.key != checkpoint_record_key(checkpoints_.key_of(lineage, tokens, chain, r.meta.begin))) {
        throw ArtifactError(ArtifactError::Kind::corrupt, "a checkpoint of the artifact does not belong to its prefix");
      }
      continue;
    }
    const auto n = static_cast<engine::Pos>(r.meta.tokens.size());
    const bool whole = next_cut < cuts.size() && cuts[next_cut].begin == r.meta.begin &&
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
  ArtifactInfo info{static_cast<std::int32_t>(tokens.size())};
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
