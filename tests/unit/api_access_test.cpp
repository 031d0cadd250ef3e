// Who a request's headers make its caller, and what of the cache that caller may see.
#include <gtest/gtest.h>

#include "api/auth/access.h"
#include "api/auth/tenants.h"

namespace prefixd::api {
namespace {

KeyRing parsed(std::string_view text) {
  auto ring = KeyRing::parse(text);
  EXPECT_TRUE(ring.has_value()) << ring.error();
  return ring ? std::move(*ring) : KeyRing{};
}

TEST(Access, WithoutKeysEveryoneIsTheDefaultTenantWithAdminRights) {
  const auto caller = identify(nullptr, "", "");
  ASSERT_TRUE(caller);
  EXPECT_EQ(caller->tenant, kDefaultTenant);
  EXPECT_TRUE(caller->admin);
}

TEST(Access, KeysInEitherHeaderNameTheTenantAndAnythingElseIs401) {
  KeyStore keys(parsed("ka alpha\nkb beta admin\n"));
  const auto alpha = identify(&keys, "Bearer ka", "");
  ASSERT_TRUE(alpha);
  EXPECT_EQ(alpha->tenant, "alpha");
  EXPECT_FALSE(alpha->admin);
  const auto beta = identify(&keys, "", "kb");
  ASSERT_TRUE(beta);
  EXPECT_EQ(beta->tenant, "beta");
  EXPECT_TRUE(beta->admin);
  for (const auto& [authorization, x_api_key] :
       {std::pair{"", ""}, {"Bearer kc", ""}, {"Basic ka", ""}, {"ka", ""}, {"Bearer ", ""}, {"", "kx"}}) {
    const auto refused = identify(&keys, authorization, x_api_key);
    ASSERT_FALSE(refused) << authorization << " / " << x_api_key;
    EXPECT_EQ(refused.error().status, 401);
    EXPECT_EQ(refused.error().code, "invalid_api_key");
  }
}

TEST(Access, ATenantViewsItselfAndAnAdminViewsAllOrOne) {
  const Caller tenant{"alpha", false};
  const Caller admin{"ops", true};
  EXPECT_EQ(view_tenant(tenant, "").value(), std::optional<std::string>("alpha"));
  EXPECT_EQ(view_tenant(tenant, "alpha").value(), std::optional<std::string>("alpha"));
  const auto other = view_tenant(tenant, "beta");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().status, 403);
  EXPECT_EQ(view_tenant(admin, "").value(), std::nullopt);
  EXPECT_EQ(view_tenant(admin, "beta").value(), std::optional<std::string>("beta"));
  EXPECT_EQ(view_tenant(admin, "../x").error().status, 400);
  EXPECT_TRUE(require_admin(admin, "/metrics"));
  EXPECT_EQ(require_admin(tenant, "/metrics").error().status, 403);
}

TEST(Access, TenantNamesNameKnownScopesAndShowOthersByDigest) {
  KeyStore keys(parsed("ka alpha\n"));
  const TenantNames names(&keys);
  EXPECT_EQ(names.name_of(tenant_scope("alpha")), "alpha");
  EXPECT_TRUE(names.name_of(tenant_scope("gone")).starts_with("scope:"));
  EXPECT_EQ(TenantNames(nullptr).name_of(tenant_scope(kDefaultTenant)), kDefaultTenant);
  EXPECT_NE(tenant_scope("alpha"), tenant_scope("beta"));
}

}  // namespace
}  // namespace prefixd::api
