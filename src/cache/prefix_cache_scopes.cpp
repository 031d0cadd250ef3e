// prefixd cache — scopes and session walls (scope.h, RequestKey::shared_prefix): how a request's
// prompt is addressed under session isolation, what each scope holds, and removing one scope from
// every tier.
#include <limits>
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

std::vector<Digest> PrefixCache::Impl::chain_of(const RequestKey& key, std::span<const Token> prompt) const {
  // A request without a session under session isolation gets a salt of its own (lineage_of): no
  // order a lease is ever given, so nothing held matches past its shared prefix, as for the
  // request itself.
  return hasher_.chain(lineage_of(key, std::numeric_limits<std::uint64_t>::max()), prompt);
}

std::map<ScopeId, ScopeStats> PrefixCache::Impl::scope_snapshot() const {
  std::map<ScopeId, ScopeStats> out = counters_.scopes;
  // Device: a tree's cells are its scope's (a namespace has one scope).
  std::unordered_map<std::string, ScopeId> tree_scope;
  for (const auto& [id, e] : device_.entries()) {
    out[e.scope].device_entries += 1;
    tree_scope.emplace(e.lineage.ns, e.scope);
  }
  if (family_.keeps_cells()) {
    for (const auto& [ns, scope] : tree_scope) {
      ScopeStats& scoped = out[scope];
      scoped.device_cells += device_.cells_of(ns);
      scoped.device_bytes = static_cast<std::uint64_t>(scoped.device_cells) * engine_.model().kv_bytes_per_token;
    }
  }
  for (const auto& [scope, usage] : host_.store().usage_by_scope()) out[scope].host = usage;
  for (const auto& [scope, usage] : checkpoints_.usage_by_scope()) out[scope].checkpoints = usage;
  return out;
}

ResetReport PrefixCache::Impl::reset_scope(const ScopeId& scope) {
  ResetReport report;
  retentions_.clear_scope(scope);
  // A namespace belongs to one scope: the scope's trees go whole.
  std::set<std::string> namespaces;
  for (const auto& [id, e] : device_.entries()) {
    if (e.scope == scope) namespaces.insert(e.lineage.ns);
  }
  const bool cells = family_.keeps_cells();
  for (const std::string& ns : namespaces) {
    if (cells) report.bytes += static_cast<std::uint64_t>(device_.cells_of(ns)) * engine_.model().kv_bytes_per_token;
    report.entries += device_.drop_namespace(ns);
    for (auto& [seq, lease] : leases_) {
      if (lease.lineage.ns == ns) lease.locked = 0;  // their cells are their own now
    }
  }
  for (const ScopeUsage& held : {host_.store().clear_scope(scope), checkpoints_.clear_scope(scope)}) {
    report.entries += held.entries;
    report.bytes += held.bytes;
  }
  if (backing_.disk() != nullptr) {
    const ScopeUsage held = backing_.disk()->clear_scope(scope);
    report.entries += held.entries;
    report.bytes += held.bytes;
  }
  publish();
  return report;
}

}  // namespace prefixd::cache
