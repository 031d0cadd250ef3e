#include "api/control/cache_scope_report.h"

#include <format>
#include <utility>
#include <vector>

#include "api/control/cache_report.h"

namespace prefixd::api {
namespace {

nlohmann::ordered_json scoped_json(const cache::ScopeStats& s, const cache::CacheStats& all,
                                   const engine::ModelInfo& model) {
  nlohmann::ordered_json outcomes = nlohmann::ordered_json::object();
  for (int i = 0; i < cache::kOutcomeCount; ++i) {
    outcomes[cache::outcome_name(static_cast<cache::Outcome>(i))] = s.outcomes[static_cast<size_t>(i)];
  }
  return {
      {"enabled", all.enabled},
      {"family", engine::family_name(model.family)},
      {"reuse", all.reuse_mode},
      {"apc_enabled", all.apc_enabled},
      {"hits", s.hits},
      {"misses", s.misses},
      {"tokens_reused", s.tokens_reused},
      {"prompt_tokens", s.prompt_tokens},
      {"outcomes", outcomes},
      {"inflight_shares", s.inflight_shares},
      {"tiers",
       {{"device", {{"entries", s.device_entries}, {"cells", s.device_cells}, {"bytes", s.device_bytes}}},
        {"host", {{"entries", s.host.entries}, {"bytes", s.host.bytes}, {"tokens", s.host.tokens}}},
        {"disk", {{"enabled", all.disk.enabled}, {"entries", s.disk.entries}, {"tokens", s.disk.tokens},
                  {"bytes", s.disk.bytes}, {"hits", s.disk_hits}}},
        {"remote", {{"enabled", all.remote.enabled}, {"hits", s.remote_hits}}}}},
      {"snapshots", {{"entries", s.checkpoints.entries}, {"bytes", s.checkpoints.bytes}}},
      {"entries", s.device_entries + s.host.entries + s.checkpoints.entries},
      {"bytes", s.device_bytes + s.host.bytes + s.checkpoints.bytes},
      {"kv_bytes_per_token", model.kv_bytes_per_token},
      {"block_size", all.block_size},
      {"hash", all.hash},
  };
}

const cache::ScopeStats& stats_of(const cache::CacheStats& stats, const cache::ScopeId& scope) {
  static const cache::ScopeStats kNothing{};
  const auto it = stats.scopes.find(scope);
  return it == stats.scopes.end() ? kNothing : it->second;
}

}  // namespace

nlohmann::ordered_json tenant_cache_stats_json(const cache::CacheStats& stats, const engine::ModelInfo& model,
                                               const std::string& tenant) {
  nlohmann::ordered_json out = {{"tenant", tenant}};
  out.update(scoped_json(stats_of(stats, tenant_scope(tenant)), stats, model));
  return out;
}

nlohmann::ordered_json cache_view_json(const cache::CacheStats& stats, const engine::ModelInfo& model,
                                       const std::optional<std::string>& tenant, const TenantNames& names) {
  if (tenant) return tenant_cache_stats_json(stats, model, *tenant);
  nlohmann::ordered_json out = cache_stats_json(stats, model);
  nlohmann::ordered_json tenants = nlohmann::ordered_json::object();
  for (const auto& [scope, scoped] : stats.scopes) tenants[names.name_of(scope)] = scoped_json(scoped, stats, model);
  out["tenants"] = std::move(tenants);
  return out;
}

void add_tenant_metrics(metrics::Registry& r, const cache::CacheStats& stats, const TenantNames& names) {
  std::vector<std::pair<std::string, const cache::ScopeStats*>> tenants;
  for (const auto& [scope, scoped] : stats.scopes) tenants.emplace_back(names.name_of(scope), &scoped);
  constexpr std::string_view kRequests = "prefixd_tenant_prompt_cache_requests_total";
  constexpr std::string_view kRequestsHelp = "Requests by tenant and by what the prompt cache did for them.";
  constexpr std::string_view kReused = "prefixd_tenant_prompt_cache_prefix_tokens_reused_total";
  constexpr std::string_view kReusedHelp = "Prompt tokens taken from the cache instead of computed, by tenant.";
  constexpr std::string_view kEntries = "prefixd_tenant_prompt_cache_entries";
  constexpr std::string_view kEntriesHelp =
      "Entries a tenant holds, by tier (host: segments; snapshots: checkpoints; disk: files).";
  constexpr std::string_view kBytes = "prefixd_tenant_prompt_cache_bytes";
  constexpr std::string_view kBytesHelp = "Bytes a tenant's entries hold, by tier.";
  r.declare(kRequests, metrics::Type::counter, kRequestsHelp);
  for (const auto& [name, s] : tenants) {
    for (int i = 0; i < cache::kOutcomeCount; ++i) {
      r.counter(kRequests, kRequestsHelp, static_cast<double>(s->outcomes[static_cast<size_t>(i)]),
                {{"tenant", name}, {"outcome", cache::outcome_name(static_cast<cache::Outcome>(i))}});
    }
  }
  r.declare(kReused, metrics::Type::counter, kReusedHelp);
  for (const auto& [name, s] : tenants) r.counter(kReused, kReusedHelp, static_cast<double>(s->tokens_reused), {{"tenant", name}});
  r.declare(kEntries, metrics::Type::gauge, kEntriesHelp);
  for (const auto& [name, s] : tenants) {
    for (const auto& [tier, n] : {std::pair<std::string_view, std::int64_t>{"device", s->device_entries},
                                  {"host", s->host.entries},
                                  {"snapshots", s->checkpoints.entries},
                                  {"disk", s->disk.entries}}) {
      r.gauge(kEntries, kEntriesHelp, static_cast<double>(n), {{"tenant", name}, {"tier", std::string(tier)}});
    }
  }
  r.declare(kBytes, metrics::Type::gauge, kBytesHelp);
  for (const auto& [name, s] : tenants) {
    for (const auto& [tier, n] : {std::pair<std::string_view, std::uint64_t>{"device", s->device_bytes},
                                  {"host", s->host.bytes},
                                  {"snapshots", s->checkpoints.bytes},
                                  {"disk", s->disk.bytes}}) {
      r.gauge(kBytes, kBytesHelp, static_cast<double>(n), {{"tenant", name}, {"tier", std::string(tier)}});
    }
  }
}

}  // namespace prefixd::api
