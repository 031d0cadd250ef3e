// prefixd api — the prompt cache as one tenant sees it: the scoped /v1/cache/stats answer, the
// per-tenant listing an admin sees, and the per-tenant part of /metrics.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/auth/access.h"
#include "cache/cache_types.h"
#include "metrics/registry.h"
#include "engine/engine.h"

namespace prefixd::api {

// What one tenant did and holds: its requests by outcome, hits, tokens reused, and its entries and
// bytes in each tier, all counted by the cache for that tenant's scope; plus the server's settings
// that explain them (family, reuse mode, block size), which are no one's secret.
nlohmann::ordered_json tenant_cache_stats_json(const cache::CacheStats& stats, const engine::ModelInfo& model,
                                               const std::string& tenant);

// GET /v1/cache/stats: a tenant's own view, or for an admin without `?tenant=` the whole cache
// (cache_stats_json) with every tenant's view under "tenants".
nlohmann::ordered_json cache_view_json(const cache::CacheStats& stats, const engine::ModelInfo& model,
                                       const std::optional<std::string>& tenant, const TenantNames& names);

// The prefixd_tenant_prompt_cache_* families, one sample per tenant (and tier or outcome). Summed
// over tenants they equal the unlabelled totals.
void add_tenant_metrics(metrics::Registry& registry, const cache::CacheStats& stats, const TenantNames& names);

}  // namespace prefixd::api
