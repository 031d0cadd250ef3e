// prefixd api — who is calling, and what of the cache they may see and change.
//
// Pure functions over header and query values (no HTTP library types), so the rules are the same
// whatever transport serves them, and unit-testable.
#pragma once

#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/errors.h"
#include "api/auth/tenants.h"
#include "cache/scope.h"

namespace prefixd::api {

struct Caller {
  std::string tenant;
  bool admin = false;
};

// The caller of a request, from its `Authorization` and `X-Api-Key` header values ("" when
// absent). Without a key store everyone is the default tenant with admin rights: one implicit
// tenant, as a server without keys always was. With one: 401 unless `Authorization: Bearer KEY`
// or `X-Api-Key: KEY` names a known key.
std::expected<Caller, ApiError> identify(const KeyStore* keys, std::string_view authorization,
                                         std::string_view x_api_key);

// The tenant a cache view or reset covers (nullopt: every tenant). A tenant's key covers its own
// tenant; naming another in `requested` (the `tenant` query parameter) is 403. An admin covers every
// tenant, or the one it names.
std::expected<std::optional<std::string>, ApiError> view_tenant(const Caller& caller, std::string_view requested);

// 403 unless the caller is an admin.
std::expected<void, ApiError> require_admin(const Caller& caller, std::string_view what);

// The cache scope of a tenant's entries and counters (cache::scope_id of its id).
cache::ScopeId tenant_scope(std::string_view tenant);

// Tenant ids by scope, for the views that list scopes: every tenant of the key store (or the
// default tenant without one). Scopes not in it (a tenant removed from the key file) are shown as
// "scope:<first 16 hex digits>".
class TenantNames {
 public:
  explicit TenantNames(const KeyStore* keys);
  std::string name_of(const cache::ScopeId& scope) const;

 private:
  std::map<cache::ScopeId, std::string> names_;
};

}  // namespace prefixd::api
