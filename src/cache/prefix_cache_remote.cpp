// prefixd cache — the shared tier's lookup plan. Before a request is admitted the scheduler asks
// for a plan (the values that could take the prompt past what the device, host and disk tiers
// rebuild) and has it run on the tier's reader thread; when it is done (or its deadline passed:
// then without it) the request is acquired and BackingTiers::adopt_fetched adopts the verified
// values into the host tier and the checkpoint store first. The engine thread never waits for the
// network. Writes go behind with the disk's (BackingTiers::write_behind).
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

std::shared_ptr<RemoteFetch> PrefixCache::Impl::fetch_remote(const RequestKey& key, std::span<const Token> prompt,
                                                             double seconds_per_token, std::function<void()> on_done) {
  RemoteTier* remote = backing_.remote();
  if (remote == nullptr || !config_.enabled || prompt.size() < 2) return nullptr;
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
  plan.model = backing_.model_key();
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
  plan.deadline = Clock::now() + std::max<Clock::duration>(remote->config().timeout, recompute);
  auto fetch = std::make_shared<RemoteFetch>(std::move(plan), std::move(on_done));
  remote->fetch(fetch);
  return fetch;
}

void PrefixCache::Impl::abandon_remote() {
  if (RemoteTier* remote = backing_.remote()) remote->count_timeout();
}

}  // namespace prefixd::cache
