#include "api/auth/access.h"

#include <format>

namespace prefixd::api {

std::expected<Caller, ApiError> identify(const KeyStore* keys, std::string_view authorization,
                                         std::string_view x_api_key) {
  if (keys == nullptr) return Caller{std::string(kDefaultTenant), true};
  const std::shared_ptr<const KeyRing> ring = keys->current();
  constexpr std::string_view bearer = "Bearer ";
  std::optional<Tenant> tenant;
  if (authorization.starts_with(bearer)) {
    tenant = ring->find(authorization.substr(bearer.size()));
  } else if (!x_api_key.empty()) {
    // Some clients (Anthropic-style SDKs, curl scripts) send the key alone.
    tenant = ring->find(x_api_key);
  }
  if (!tenant) return std::unexpected(unauthorized());
  return Caller{std::move(tenant->id), tenant->admin};
}

std::expected<std::optional<std::string>, ApiError> view_tenant(const Caller& caller, std::string_view requested) {
  if (requested.empty()) {
    if (caller.admin) return std::nullopt;
    return caller.tenant;
  }
  if (!caller.admin && requested != caller.tenant) {
    return std::unexpected(forbidden(std::format("this key belongs to tenant '{}'; only an admin key may name another "
                                                 "tenant",
                                                 caller.tenant)));
  }
  if (!valid_tenant_id(requested)) {
    return std::unexpected(invalid_param("tenant", std::format("'{}' is not a tenant id", requested)));
  }
  return std::string(requested);
}

std::expected<void, ApiError> require_admin(const Caller& caller, std::string_view what) {
  if (caller.admin) return {};
  return std::unexpected(forbidden(std::format("{} needs an admin key", what)));
}

cache::ScopeId tenant_scope(std::string_view tenant) { return cache::scope_id(tenant); }

TenantNames::TenantNames(const KeyStore* keys) {
  std::vector<std::string> ids{std::string(kDefaultTenant)};
  if (keys != nullptr) ids = keys->current()->tenants();
  for (const std::string& id : ids) names_.emplace(tenant_scope(id), id);
}

std::string TenantNames::name_of(const cache::ScopeId& scope) const {
  if (auto it = names_.find(scope); it != names_.end()) return it->second;
  return "scope:" + cache::to_hex(scope).substr(0, 16);
}

}  // namespace prefixd::api
