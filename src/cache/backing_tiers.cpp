#include "cache/backing_tiers.h"

#include <algorithm>

#include "cache/path_walk.h"
#include "cache/trace.h"

namespace prefixd::cache {

BackingTiers::BackingTiers(const engine::Engine& engine, const Family& family, const CacheConfig& config,
                           const BlockHasher& hasher, HostTier& host, CheckpointStore& checkpoints)
    : family_(family), config_(config), hasher_(hasher), host_(host), checkpoints_(checkpoints),
      model_key_(cache::model_key(engine.model().fingerprint, engine.model().runtime_signature)) {
  if (!config_.enabled) return;
  if (!config_.disk_path.empty()) {
    disk_ = std::make_unique<DiskStore>(DiskStore::Options{config_.disk_path, config_.disk_capacity_bytes,
                                                           config_.disk_queue_bytes, model_key_});
    host_.store().set_spill([this](const Digest& key, const HostSegment& segment) { spill(key, segment); });
  }
  if (!config_.remote_urls.empty()) {
    RemoteTierConfig remote;
    remote.urls = config_.remote_urls;
    remote.timeout = std::chrono::milliseconds(std::max(1, config_.remote_timeout_ms));
    remote.queue_capacity_bytes = config_.remote_queue_bytes;
    auto tier = RemoteTier::create(std::move(remote), model_key_);
    if (!tier) throw std::invalid_argument("--cache-remote: " + tier.error());
    remote_ = std::move(*tier);
  }
}

void BackingTiers::spill(const Digest& key, const HostSegment& segment) {
  if (!disk_ || disk_->has(key)) return;
  Record record;
  record.meta = RecordMeta{RecordKind::segment, model_key_, {}, key, segment.parent, segment.begin};
  record.meta.scope = segment.scope;
  record.meta.tokens = segment.token_ids;
  record.payload = segment.state;
  // The namespace is not kept with a host segment; a spilled one carries its root's digest only
  // through its key and parent (the index and lookups use those).
  disk_->enqueue(DiskStore::Job{{std::move(record)}, {}});
}

void BackingTiers::write_behind(const Lineage& lineage, std::span<const engine::Token> tokens, engine::SeqId holder,
                                     const ScopeId& scope) {
  if ((!disk_ && !remote_) || !family_.keeps_cells() || tokens.empty()) return;
  DiskStore::Job job;
  std::vector<RemoteTier::Write> shared;
  std::vector<Digest> keys;
  // One record per segment the disk or the shared tier lacks, serialized once for both.
  const auto persist = [&](const HostTier::Cut& cut, bool supersede) {
    const bool to_disk = disk_ && !disk_->has(cut.key);
    const auto part = tokens.subspan(static_cast<size_t>(cut.begin), static_cast<size_t>(cut.stop - cut.begin));
    Record record;
    record.meta = RecordMeta{RecordKind::segment, model_key_, digest_from(lineage.ns), cut.key, cut.parent, cut.begin};
    record.meta.scope = scope;
    record.meta.tokens.assign(part.begin(), part.end());
    const std::optional<std::string> name = remote_name_of(record);
    const bool to_remote = name && !remote_->known(*name);
    if (!to_disk && !to_remote) return true;
    record.payload = host_.serialize(holder, cut.begin, cut.stop);
    if (record.payload.empty()) return false;
    if (to_disk && supersede) {
      // An earlier, shorter tail of the same conversation is a prefix of this segment: redundant.
      for (const Digest& sibling : disk_->children(cut.parent, part.front())) {
        const std::optional<RecordMeta> other = disk_->meta(sibling);
        if (sibling != cut.key && other && other->tokens.size() < part.size() &&
            std::ranges::equal(other->tokens, part.first(other->tokens.size()))) {
          job.supersedes.push_back(sibling);
        }
      }
    }
    if (to_remote) shared.push_back(RemoteTier::Write{*name, to_disk ? record : std::move(record)});
    if (to_disk) job.records.push_back(std::move(record));
    return true;
  };
  for (const HostTier::Cut& cut : host_.cuts(lineage, tokens, 0)) {
    keys.push_back(cut.key);
    if (!persist(cut, true)) break;
  }
  // The wall segment (HostTier::wall_cut), so that other sessions find the whole shared prefix.
  if (const std::optional<HostTier::Cut> wall = host_.wall_cut(lineage, tokens)) persist(*wall, false);
  remote_write(std::move(shared));
  if (!disk_) return;
  std::reverse(keys.begin(), keys.end());
  disk_->touch(keys);  // deepest first: the prefix stays newer than what extends it
  if (!job.records.empty()) disk_->enqueue(std::move(job));
}

bool BackingTiers::keep_checkpoint(const Lineage& lineage, std::span<const engine::Token> prefix,
                                        std::span<const Digest> chain, engine::Bytes state, const std::string& session,
                                        CheckpointKind kind, engine::Pos window_from, const ScopeId& scope) {
  const auto position = static_cast<engine::Pos>(prefix.size());
  checkpoint_behind(lineage.ns, checkpoints_.key_of(lineage, prefix, chain, position), position, state,
                    window_from, scope);
  return checkpoints_.save(lineage, prefix, chain, std::move(state), session, kind, window_from, scope);
}

void BackingTiers::checkpoint_behind(const std::string& ns, const Digest& key, engine::Pos position,
                                           std::span<const std::uint8_t> state, engine::Pos window_from,
                                           const ScopeId& scope) {
  const Digest record_key = checkpoint_record_key(key);
  const bool to_disk = disk_ && !disk_->has(record_key);
  const std::string name = remote_checkpoint_name(record_key);
  const bool to_remote = remote_ && !remote_->known(name);
  if (state.empty() || (!to_disk && !to_remote)) return;
  Record record;
  record.meta = RecordMeta{RecordKind::checkpoint, model_key_, digest_from(ns), record_key, {}, position, window_from};
  record.meta.scope = scope;
  record.payload.assign(state.begin(), state.end());
  if (to_remote) remote_write({RemoteTier::Write{name, to_disk ? record : std::move(record)}});
  if (to_disk) disk_->enqueue(DiskStore::Job{{std::move(record)}, {}});
}

BackingTiers::RestorePlan BackingTiers::plan_restore(const Lineage& lineage, std::span<const engine::Token> query,
                                                     std::int32_t on_device, bool with_disk) const {
  // One walk over the host tier and the disk's index (nothing is read): the host's leading
  // segments are the host plan, the disk's files the ones to read and promote.
  const bool disk = with_disk && disk_ && family_.keeps_cells() && config_.host_capacity_bytes > 0;
  const WalkTiers tiers{.device = on_device,
                        .host = host_.store().size() > 0 ? &host_.store() : nullptr,
                        .disk = disk ? disk_.get() : nullptr,
                        .after_device_part = true};
  const PathWalk walk = walk_path(host_, hasher_, tiers, lineage, query);
  RestorePlan out{as_host_plan(host_, hasher_, walk), {{}, 0}};
  out.disk.reach = out.host.length;
  for (const PathPiece& piece : walk.pieces) {
    if (piece.from == PieceFrom::disk) {
      out.disk.files.push_back(DiskSegment{piece.stored, piece.cut.parent, piece.cut.begin, piece.length()});
    }
  }
  // Files worth reading take the plan further, to a prefix long enough to reuse.
  if (!out.disk.files.empty() && walk.reach() > out.host.length && walk.reach() >= config_.min_prefix) {
    out.disk.reach = walk.reach();
  } else {
    out.disk.files.clear();
  }
  return out;
}

HostTier::Plan BackingTiers::promote(const Lineage& lineage, std::span<const engine::Token> query,
                                     std::int32_t on_device, const HostTier::Plan& plan, const DiskExtension& extension,
                                     HostStore::Evicted& evicted) {
  if (extension.files.empty()) return plan;
  // Read, verify and promote, in position order; stop at the first that fails.
  std::vector<Digest> keep = plan.ancestors;
  keep.insert(keep.end(), plan.keys.begin(), plan.keys.end());
  std::vector<Digest> keys;
  for (const DiskSegment& file : extension.files) keys.push_back(file.key);
  disk_->prefetch(keys);
  std::vector<std::optional<Record>> records = disk_->read_all(keys);
  std::vector<Digest> promoted;
  for (size_t i = 0; i < extension.files.size(); ++i) {
    const DiskSegment& file = extension.files[i];
    std::optional<Record>& record = records[i];
    if (!record || record->meta.kind != RecordKind::segment || record->meta.parent != file.parent ||
        record->meta.begin != file.begin) {
      break;
    }
    const auto tokens = static_cast<std::int32_t>(record->meta.tokens.size());
    // A file's scope is that of its namespace: the requesting scope's, for any file this walk reaches.
    HostSegment segment{file.begin, tokens, file.parent, std::move(record->meta.tokens), std::move(record->payload), {},
                        record->meta.scope};
    if (!host_.adopt(file.key, std::move(segment), evicted, keep)) break;
    keep.push_back(file.key);
    promoted.push_back(file.key);
    promoted_segments_ += 1;
  }
  // Each adopted segment went in as the newest, after its parent: touch the path deepest first so
  // that every segment is again older than those it extends (HostStore::verify_lru_order), whether
  // or not this request goes on to restore it.
  for (auto key = promoted.rbegin(); key != promoted.rend(); ++key) host_.store().touch(*key);
  for (auto key = plan.keys.rbegin(); key != plan.keys.rend(); ++key) host_.store().touch(*key);
  for (const Digest& key : plan.ancestors) host_.store().touch(key);
  trace(config_, "disk: promoted up to position {} (host alone {})", extension.reach, plan.length);
  return host_.plan(lineage, query, on_device);
}

std::vector<engine::Pos> BackingTiers::disk_checkpoints(const Lineage& lineage, std::span<const engine::Token> query,
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

bool BackingTiers::promote_checkpoint(const Lineage& lineage, std::span<const engine::Token> query,
                                      std::span<const Digest> chain, std::int32_t have, std::int32_t limit,
                                      const std::string& session, const ScopeId& scope) {
  for (const engine::Pos p : disk_checkpoints(lineage, query, chain, have, limit)) {
    if (promote_checkpoint_at(lineage, query, chain, p, session, scope)) return true;
  }
  return false;
}

bool BackingTiers::promote_checkpoint_at(const Lineage& lineage, std::span<const engine::Token> query,
                                         std::span<const Digest> chain, engine::Pos position,
                                         const std::string& session, const ScopeId& scope) {
  const Digest record_key = checkpoint_record_key(checkpoints_.key_of(lineage, query, chain, position));
  std::optional<Record> record = disk_->read(record_key);
  if (!record || record->meta.kind != RecordKind::checkpoint || record->meta.begin != position) return false;
  const auto prefix = query.first(static_cast<size_t>(position));
  if (!checkpoints_.save(lineage, prefix, chain, std::move(record->payload), session, CheckpointKind::boundary,
                         record->meta.window_from, scope)) {
    return false;
  }
  promoted_checkpoints_ += 1;
  trace(config_, "disk: promoted the checkpoint at {}", position);
  return true;
}

std::shared_ptr<RemoteFetch> BackingTiers::fetch(const Lineage& lineage, std::span<const engine::Token> query,
                                                const HeldPrefix& held, std::span<const engine::Pos> checkpoint_positions,
                                                double seconds_per_token, std::function<void()> on_done) {
  const bool trimmable = family_.trimmable();
  if (!remote_) return nullptr;
  const auto n = static_cast<std::int32_t>(query.size());
  const std::int32_t seg = host_.segment_tokens();
  const std::int32_t block = hasher_.block_size();
  const bool attention = family_.keeps_cells() && config_.host_capacity_bytes > 0;
  const std::vector<Digest> chain = hasher_.chain(lineage, query);

  RemoteFetchPlan plan;
  plan.hasher = hasher_;
  plan.model = model_key_;
  plan.segment_tokens = seg;
  plan.segments = attention;
  plan.local_reach = attention ? std::max(held.disk, trimmable ? held.tokens : 0) : 0;
  if (attention && n - plan.local_reach >= block) {
    plan.start = plan.local_reach / seg * seg;
    for (std::int32_t g = plan.start; g + seg <= n; g += seg) {
      plan.grid_keys.push_back(chain[static_cast<size_t>((g + seg) / block) - 1]);
      plan.grid_parents.push_back(hasher_.parent(lineage, chain, g, g + seg));
    }
    for (std::int32_t g = plan.start; g < n; g += seg) {
      std::vector<RemoteFetchPlan::TailParent> parents{{hasher_.parent(lineage, chain, g, n), n - g}};
      // Before a fork, the namespace's own segments too (a wall segment), capped at the fork.
      if (lineage.forks_within(g + 1, n)) parents.push_back({hasher_.parent(lineage, chain, g, g + 1), lineage.fork - g});
      plan.tail_parents.push_back(std::move(parents));
    }
  }
  if (!trimmable) {
    for (const engine::Pos p : checkpoint_positions) {
      if (p <= std::max(held.checkpoint, held.tokens) || p < config_.min_prefix || p > n) continue;
      plan.checkpoints.push_back({p, checkpoint_record_key(checkpoints_.key_of(lineage, query, chain, p))});
    }
  }
  if (plan.grid_keys.empty() && plan.tail_parents.empty() && plan.checkpoints.empty()) return nullptr;
  plan.query.assign(query.begin(), query.end());
  // Wait until the timeout, or as long as computing what the lookup could bring would take.
  const std::int32_t could_bring = n - std::min(plan.local_reach, std::max(held.checkpoint, held.tokens));
  const double per_token = seconds_per_token > 0 ? seconds_per_token : 1e-3;
  const auto recompute = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(per_token * static_cast<double>(std::max(0, could_bring))));
  plan.deadline = std::chrono::steady_clock::now() + std::max<std::chrono::steady_clock::duration>(remote_->config().timeout, recompute);
  auto fetch = std::make_shared<RemoteFetch>(std::move(plan), std::move(on_done));
  remote_->fetch(fetch);
  return fetch;
}

std::int32_t BackingTiers::adopt_fetched(RemoteFetch& fetch, const Lineage& lineage,
                                        std::span<const engine::Token> query, const std::string& session,
                                        const ScopeId& scope, HostStore::Evicted& evicted) {
  if (!remote_ || !fetch.done()) return kNoFork;
  RemoteFetchResult result = fetch.take_result();
  if (result.segments.empty() && !result.checkpoint) return kNoFork;
  const RemoteFetchPlan& plan = fetch.plan();
  if (!std::ranges::equal(query, plan.query)) return kNoFork;
  // What the host tier holds of the prompt now is kept while the fetched segments go in.
  const HostTier::Plan before = host_.plan(lineage, query);
  std::vector<Digest> keep = before.ancestors;
  keep.insert(keep.end(), before.keys.begin(), before.keys.end());
  std::int64_t segments = 0, checkpoints = 0;
  for (Record& record : result.segments) {
    const Digest key = record.meta.key;
    const auto tokens = static_cast<std::int32_t>(record.meta.tokens.size());
    HostSegment segment{record.meta.begin, tokens, record.meta.parent, std::move(record.meta.tokens),
                        std::move(record.payload), {}, scope};
    if (!host_.adopt(key, std::move(segment), evicted, keep)) break;
    keep.push_back(key);
    segments += 1;
  }
  if (result.checkpoint) {
    const engine::Pos p = result.checkpoint->meta.begin;
    const std::vector<Digest> chain = hasher_.chain(lineage, query);
    if (checkpoints_.save(lineage, query.first(static_cast<size_t>(p)), chain,
                          std::move(result.checkpoint->payload), session, CheckpointKind::boundary,
                          result.checkpoint->meta.window_from, scope)) {
      checkpoints += 1;
    }
  }
  remote_->count_promoted(segments, checkpoints);
  trace(config_, "remote: adopted {} segments (reach {}) and {} checkpoints past the local reach {}", segments, result.reach,
        checkpoints, plan.local_reach);
  return segments + checkpoints > 0 ? plan.local_reach : kNoFork;
}

void BackingTiers::remote_write(std::vector<RemoteTier::Write> writes) {
  if (remote_ && !writes.empty()) remote_->enqueue(std::move(writes));
}

std::optional<std::string> BackingTiers::remote_name_of(const Record& record) const {
  if (!remote_) return std::nullopt;
  if (record.meta.kind == RecordKind::checkpoint) return remote_checkpoint_name(record.meta.key);
  if (static_cast<std::int32_t>(record.meta.tokens.size()) == host_.segment_tokens()) {
    return remote_segment_name(record.meta.key);
  }
  const std::optional<Digest> index = tail_index(hasher_, record.meta.parent, record.meta.tokens);
  if (!index) return std::nullopt;
  return remote_tail_name(*index);
}

}  // namespace prefixd::cache
