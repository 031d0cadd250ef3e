// prefixd cache — scopes and session walls (scope.h, RequestKey::shared_prefix): how a request's
// prompt is addressed under session isolation, what each scope holds, and removing one scope from
// every tier.
#include <set>

#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

Lineage PrefixCache::Impl::lineage_of(const RequestKey& key, std::uint64_t order) const {
  Lineage lineage{key.namespace_digest};
  if (key.shared_prefix == kNoFork) return lineage;
  lineage.fork = std::max(0, key.shared_prefix);
  std::string salt_input = "prefixd.session-salt.v1";
  if (key.session.empty()) {
    salt_input += digest_string(nonce_);
    for (int i = 0; i < 8; ++i) salt_input.push_back(static_cast<char>(order >> (8 * i)));
  } else {
    salt_input += session_id(key);
  }
  lineage.salt = blake3_digest({reinterpret_cast<const std::uint8_t*>(salt_input.data()), salt_input.size()});
  return lineage;
}

std::map<ScopeId, ScopeStats> PrefixCache::Impl::scope_snapshot() const {
  std::map<ScopeId, ScopeStats> out = scope_counters_;
  // Device: a tree's cells are its scope's (a namespace has one scope).
  std::unordered_map<std::string, ScopeId> tree_scope;
  for (const auto& [id, e] : entries_) {
    out[e.scope].device_entries += 1;
    tree_scope.emplace(e.lineage.ns, e.scope);
  }
  if (engine::has_attention_cells(engine_.model())) {
    for (const auto& [ns, scope] : tree_scope) {
      ScopeStats& scoped = out[scope];
      scoped.device_cells += trees_.at(ns).unique_tokens();
      scoped.device_bytes = static_cast<std::uint64_t>(scoped.device_cells) * engine_.model().kv_bytes_per_token;
    }
  }
  for (const auto& [scope, usage] : host_.store().usage_by_scope()) out[scope].host = usage;
  for (const auto& [scope, usage] : checkpoints_.usage_by_scope()) out[scope].checkpoints = usage;
  return out;
}

ResetReport PrefixCache::Impl::reset_scope(const ScopeId& scope) {
  ResetReport report;
  // A namespace belongs to one scope: the scope's trees go whole.
  std::set<std::string> namespaces;
  for (const auto& [id, e] : entries_) {
    if (e.scope == scope) namespaces.insert(e.lineage.ns);
  }
  const bool cells = engine::has_attention_cells(engine_.model());
  for (const std::string& ns : namespaces) {
    if (auto tree = trees_.find(ns); tree != trees_.end() && cells) {
      report.bytes += static_cast<std::uint64_t>(tree->second.unique_tokens()) * engine_.model().kv_bytes_per_token;
    }
    std::erase_if(entries_, [&](const auto& item) {
      const DeviceEntry& e = item.second;
      if (e.lineage.ns != ns) return false;
      engine_.remove_sequence(e.holder, 0, -1);
      free_holders_.push_back(e.holder);
      report.entries += 1;
      return true;
    });
    trees_.erase(ns);
    for (auto& [seq, lease] : leases_) {
      if (lease.lineage.ns == ns) lease.locked = 0;  // their cells are their own now
    }
  }
  for (const ScopeUsage& held : {host_.store().clear_scope(scope), checkpoints_.clear_scope(scope)}) {
    report.entries += held.entries;
    report.bytes += held.bytes;
  }
  std::erase_if(session_prompts_, [&](const auto& item) { return item.second.key.scope == scope; });
  if (disk_) {
    const ScopeUsage held = disk_->clear_scope(scope);
    report.entries += held.entries;
    report.bytes += held.bytes;
  }
  publish();
  return report;
}

}  // namespace prefixd::cache
