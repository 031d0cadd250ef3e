// prefixd cache — the shared tier's lookup plan. When a request is queued its ticket (open(),
// prefix_cache_tickets.cpp) plans the lookup (the values that could take the prompt past what the device,
// host and disk tiers rebuild) and has it run on the tier's reader thread; once it completed by its
// deadline (otherwise without it, abandoned) admit() acquires the request and
// BackingTiers::adopt_fetched adopts the verified values into the host tier and the checkpoint
// store first. The engine thread never waits for the network. Writes go behind with the disk's
// (BackingTiers::write_behind).
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

std::shared_ptr<RemoteFetch> PrefixCache::Impl::fetch_remote(const RequestKey& key, std::span<const Token> prompt,
                                                             double seconds_per_token, std::function<void()> on_done) {
  if (backing_.remote() == nullptr || !config_.enabled || prompt.size() < 2) return nullptr;
  const auto n = static_cast<std::int32_t>(prompt.size()) - 1;  // the one-token guard
  const auto query = prompt.first(static_cast<size_t>(n));
  const HeldPrefix held = this->held(key, query);
  const Lineage lineage = lineage_of(key, next_order_ + 1);
  // Where a server that computed this prompt (or its earlier turns) took checkpoints: the same
  // positions this server takes them at, the session wall among them.
  std::vector<engine::Pos> positions;
  if (!trimmable()) positions = planner_.checkpoint_positions(key, n);
  return backing_.fetch(lineage, query, held, positions, seconds_per_token, std::move(on_done));
}

void PrefixCache::Impl::abandon_remote() {
  if (RemoteTier* remote = backing_.remote()) remote->count_timeout();
}

}  // namespace prefixd::cache
