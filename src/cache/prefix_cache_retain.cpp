// PrefixCache::Impl::retain: what a request asked the cache to keep ahead of LRU eviction (the
// registry and its rules: retention.h).
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

void PrefixCache::Impl::retain(const Lease& lease, std::span<const Token> tokens) {
  if (lease.key.retain.empty() || !can_reuse()) return;
  const auto now = RetentionClock::now();
  bool changed = false;
  for (const RetainAsk& ask : lease.key.retain) {
    const std::int32_t length = std::min(ask.length, static_cast<std::int32_t>(tokens.size()));
    if (length < config_.min_prefix || ask.duration <= std::chrono::seconds::zero()) continue;
    const auto prefix = tokens.first(static_cast<std::size_t>(length));
    Retention retention{.ns = lease.lineage.ns,
                        .tokens = std::vector<Token>(prefix.begin(), prefix.end()),
                        .scope = lease.key.scope,
                        .until = now + ask.duration,
                        .keys = {}};
    // The host segments a demotion of the donated sequence makes, up to the one holding the
    // prefix's last token: exactly what a restore of the prefix reads.
    for (const HostTier::Cut& cut : host_.cuts(lease.lineage, tokens, 0)) {
      if (cut.begin < length) retention.keys.push_back(cut.key);
    }
    if (const auto wall = host_.wall_cut(lease.lineage, tokens); wall && wall->begin < length) {
      retention.keys.push_back(wall->key);
    }
    // Checkpoint families resume only where a state was saved: at the request's boundaries
    // within the prefix, and at its end (the pair of positions a prompt end keeps).
    if (!trimmable()) {
      const std::vector<Digest> chain = hasher_.chain(lease.lineage, prefix);
      for (const engine::Pos position : lease.key.boundaries) {
        if (position > 0 && position < length - 1) retention.keys.push_back(checkpoints_.key_of(lease.lineage, prefix, chain, position));
      }
      if (length > 1) retention.keys.push_back(checkpoints_.key_of(lease.lineage, prefix, chain, length - 1));
      retention.keys.push_back(checkpoints_.key_of(lease.lineage, prefix, chain, length));
    }
    const Retentions::Added added = retentions_.add(std::move(retention), now);
    trace("retain {} tokens of ns {} for {} s: {}", length, short_hex(lease.lineage.ns), ask.duration.count(),
          added == Retentions::Added::refused ? "refused" : added == Retentions::Added::renewed ? "renewed" : "retained");
    changed = true;
  }
  if (changed) publish();
}

}  // namespace prefixd::cache
