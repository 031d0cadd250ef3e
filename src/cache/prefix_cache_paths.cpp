// prefixd cache — a key's path (KeyPaths does the walking): what the tiers hold of it, and
// forgetting it past a position, device entries included.
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

HeldPrefix PrefixCache::Impl::held(const RequestKey& key, std::span<const Token> tokens) const {
  if (!can_reuse()) return {};
  // The order only salts a key without a session under a session wall: nothing past the wall is
  // addressed under a salt no request has had yet.
  return paths_.held(key, lineage_of(key, next_order_ + 1), tokens);
}

ResetReport PrefixCache::Impl::forget(const RequestKey& key, std::span<const Token> tokens, engine::Pos keep) {
  ResetReport report;
  const auto n = static_cast<std::int32_t>(tokens.size());
  keep = std::max<engine::Pos>(0, keep);
  if (!can_reuse() || keep >= n) return report;
  refresh_window_entries();
  flush_disk();  // what is queued for this path is on disk, indexed, and removed below
  const std::string& ns = key.namespace_digest;
  retentions_.lift_path(ns, tokens, keep);  // before the tiers: nothing forgotten stays retained
  const Lineage lineage = lineage_of(key, next_order_ + 1);
  const std::vector<Digest> chain = hasher_.chain(lineage, tokens);
  const std::uint64_t device_before = device_.bytes();

  // Device: every entry `key` could reuse more than `keep` tokens of along the path. An entry that
  // shares the path only up to `keep` (another key's) is not touched, and cutting the others never
  // frees a cell it uses (RadixTree::keep_length).
  if (device_.tree(ns) != nullptr) {
    const std::int32_t target = trimmable() && keep >= config_.min_prefix ? keep : 0;
    device_.cut_path(ns, tokens, session_id(key), reach_of(key), keep, target, report);
    repin(ns);
  }
  report.bytes += device_before - device_.bytes();

  paths_.forget_stored(lineage, tokens, chain, keep, report);
  trace("forget: {} tokens past {}: {} entries, {} bytes ({} entries kept locked)", n, keep, report.entries,
        report.bytes, report.locked_entries);
  publish();
  return report;
}

}  // namespace prefixd::cache
