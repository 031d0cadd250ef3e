// prefixd cache — the shared tier's place in a request's life.
//
// Writes: whatever is written behind to disk is also written behind to the shared tier (the same
// records: segments of every donated prefix, the session wall's segment, every checkpoint), under
// names any server computes from a prompt (remote_fetch.h); a name this server wrote or read lately
// is not sent again. Reads: before a request is admitted the scheduler asks for a plan (the values
// that could take the prompt past what the device, host and disk tiers rebuild) and has it run on
// the tier's reader thread; when it is done (or its deadline passed: then without it) the request
// is acquired, and the verified values are adopted into the host tier and the checkpoint store
// first. The engine thread never waits for the network.
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

void PrefixCache::Impl::open_remote() {
  if (config_.remote_urls.empty() || !config_.enabled) return;
  model_key_ = model_key(engine_.model().fingerprint, engine_.model().runtime_signature);
  RemoteTierConfig remote;
  remote.urls = config_.remote_urls;
  remote.timeout = std::chrono::milliseconds(std::max(1, config_.remote_timeout_ms));
  remote.queue_capacity_bytes = config_.remote_queue_bytes;
  auto tier = RemoteTier::create(std::move(remote), model_key_);
  if (!tier) throw std::invalid_argument("--cache-remote: " + tier.error());
  remote_ = std::move(*tier);
}

std::shared_ptr<RemoteFetch> PrefixCache::Impl::fetch_remote(const RequestKey& key, std::span<const Token> prompt,
                                                             double seconds_per_token, std::function<void()> on_done) {
  if (!remote_ || !config_.enabled || prompt.size() < 2) return nullptr;
  const auto n = static_cast<std::int32_t>(prompt.size()) - 1;  // the one-token guard
  const auto query = prompt.first(static_cast<size_t>(n));
  const std::int32_t seg = host_.segment_tokens();
  const std::int32_t block = hasher_.block_size();
  const bool attention = engine::has_attention_cells(engine_.model()) && config_.host_capacity_bytes > 0;
  const HeldPrefix held = this->held(key, query);
  const Lineage lineage = lineage_of(key, next_order_ + 1);
  const std::vector<Digest> chain = hasher_.chain(lineage, query);

  RemoteFetchPlan plan;
  plan.hasher = hasher_;
  plan.model = model_key_;
  plan.segment_tokens = seg;
  plan.segments = attention;
  plan.local_reach = attention ? std::max(held.disk, trimmable() ? held.tokens : 0) : 0;
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
  if (!trimmable()) {
    // Where a server that computed this prompt (or its earlier turns) took checkpoints: the same
    // positions this server takes them at (checkpoint_positions), the session wall among them.
    for (const engine::Pos p : checkpoint_positions(key, n)) {
      if (p <= std::max(held.checkpoint, held.tokens) || p < config_.min_prefix || p > n) continue;
      plan.checkpoints.push_back({p, checkpoint_record_key(checkpoints_.key_of(lineage, query, chain, p))});
    }
  }
  if (plan.grid_keys.empty() && plan.tail_parents.empty() && plan.checkpoints.empty()) return nullptr;
  plan.query.assign(query.begin(), query.end());
  // Wait until the timeout, or as long as computing what the lookup could bring would take.
  const std::int32_t could_bring = n - std::min(plan.local_reach, std::max(held.checkpoint, held.tokens));
  const double per_token = seconds_per_token > 0 ? seconds_per_token : 1e-3;
  const auto recompute = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(per_token * static_cast<double>(std::max(0, could_bring))));
  plan.deadline = Clock::now() + std::max<Clock::duration>(remote_->config().timeout, recompute);
  auto fetch = std::make_shared<RemoteFetch>(std::move(plan), std::move(on_done));
  remote_->fetch(fetch);
  return fetch;
}

std::int32_t PrefixCache::Impl::adopt_remote(RemoteFetch& fetch, const Lease& lease) {
  if (!remote_ || !fetch.done()) return kNoFork;
  RemoteFetchResult result = fetch.take_result();
  if (result.segments.empty() && !result.checkpoint) return kNoFork;
  const RemoteFetchPlan& plan = fetch.plan();
  const auto n = static_cast<std::int32_t>(lease.prompt.size()) - 1;
  const auto query = std::span<const Token>(lease.prompt).first(static_cast<size_t>(std::max(0, n)));
  if (!std::ranges::equal(query, plan.query)) return kNoFork;
  // What the host tier holds of the prompt now is kept while the fetched segments go in.
  const HostTier::Plan before = host_.plan(lease.lineage, query);
  std::vector<Digest> keep = before.ancestors;
  keep.insert(keep.end(), before.keys.begin(), before.keys.end());
  HostStore::Evicted evicted;
  std::int64_t segments = 0, checkpoints = 0;
  for (Record& record : result.segments) {
    const Digest key = record.meta.key;
    const auto tokens = static_cast<std::int32_t>(record.meta.tokens.size());
    HostSegment segment{record.meta.begin, tokens, record.meta.parent, std::move(record.meta.tokens),
                        std::move(record.payload), {}, lease.key.scope};
    if (!host_.adopt(key, std::move(segment), evicted, keep)) break;
    keep.push_back(key);
    segments += 1;
  }
  add_evictions(evicted);
  if (result.checkpoint) {
    const engine::Pos p = result.checkpoint->meta.begin;
    const std::vector<Digest> chain = hasher_.chain(lease.lineage, query);
    if (checkpoints_.save(lease.lineage, query.first(static_cast<size_t>(p)), chain,
                          std::move(result.checkpoint->payload), lease.session, CheckpointKind::boundary,
                          result.checkpoint->meta.window_from, lease.key.scope)) {
      checkpoints += 1;
    }
  }
  remote_->count_promoted(segments, checkpoints);
  trace("remote: adopted {} segments (reach {}) and {} checkpoints past the local reach {}", segments, result.reach,
        checkpoints, plan.local_reach);
  return segments + checkpoints > 0 ? plan.local_reach : kNoFork;
}

void PrefixCache::Impl::abandon_remote() {
  if (remote_) remote_->count_timeout();
}

void PrefixCache::Impl::remote_write(std::vector<RemoteTier::Write> writes) {
  if (remote_ && !writes.empty()) remote_->enqueue(std::move(writes));
}

std::optional<std::string> PrefixCache::Impl::remote_name_of(const Record& record) const {
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
