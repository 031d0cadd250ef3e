// The cache namespace digest: whatever changes the meaning of the tokens changes the digest, and
// nothing else does.
#include <gtest/gtest.h>

#include "api/cache_namespace.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

const json kTools = json::array({{{"type", "function"}, {"function", {{"name", "a"}}}},
                                 {{"type", "function"}, {"function", {{"name", "b"}}}}});

NamespaceFields base() {
  return NamespaceFields{.model_id = "fingerprint-1",
                         .template_signature = template_signature("{{ messages }}", {{"x", 1}}, "auto", kTools),
                         .tenant_salt = ""};
}

TEST(ApiCacheNamespace, DigestIs32BytesAndDeterministic) {
  EXPECT_EQ(namespace_digest(base()).size(), 32u);
  EXPECT_EQ(namespace_digest(base()), namespace_digest(base()));
  EXPECT_EQ(template_signature("t", nullptr, "none", nullptr).size(), 32u);
  EXPECT_EQ(to_hex(namespace_digest(base())).size(), 64u);
}

TEST(ApiCacheNamespace, EveryFieldSeparatesNamespaces) {
  const std::string reference = namespace_digest(base());
  auto changed = [&](auto mutate) {
    NamespaceFields fields = base();
    mutate(fields);
    return namespace_digest(fields);
  };
  EXPECT_NE(changed([](NamespaceFields& f) { f.model_id = "fingerprint-2"; }), reference);
  EXPECT_NE(changed([](NamespaceFields& f) { f.lora_id = "adapter"; }), reference);
  EXPECT_NE(changed([](NamespaceFields& f) { f.template_signature = std::string(kRawCompletionSignature); }), reference);
  EXPECT_NE(changed([](NamespaceFields& f) { f.runtime_signature = "rope.scaling.type=yarn;"; }), reference);
  EXPECT_NE(changed([](NamespaceFields& f) { f.multimodal_digest = "image:abc"; }), reference);
  EXPECT_NE(changed([](NamespaceFields& f) { f.tenant_salt = "tenant-a"; }), reference);
}

TEST(ApiCacheNamespace, DifferentRuntimeSignaturesNeverShare) {
  NamespaceFields a = base();
  NamespaceFields b = base();
  a.runtime_signature = "type_k=f16;type_v=f16;flash_attn=disabled;";
  b.runtime_signature = "type_k=f16;type_v=f16;flash_attn=enabled;";
  EXPECT_NE(namespace_digest(a), namespace_digest(b));
  b.runtime_signature = a.runtime_signature;
  EXPECT_EQ(namespace_digest(a), namespace_digest(b));
}

TEST(ApiCacheNamespace, FieldsAreLengthPrefixedNotConcatenated) {
  NamespaceFields a = base();
  NamespaceFields b = base();
  a.model_id = "ab";
  a.lora_id = "c";
  b.model_id = "a";
  b.lora_id = "bc";
  EXPECT_NE(namespace_digest(a), namespace_digest(b));
}

TEST(ApiCacheNamespace, DifferentSaltsNeverShare) {
  NamespaceFields a = base();
  NamespaceFields b = base();
  a.tenant_salt = "tenant-a";
  b.tenant_salt = "tenant-b";
  EXPECT_NE(namespace_digest(a), namespace_digest(b));
}

TEST(ApiCacheNamespace, TemplateSignatureCoversSourceKwargsToolChoiceAndTools) {
  const std::string reference = template_signature("{{ messages }}", {{"x", 1}}, "auto", kTools);
  EXPECT_NE(template_signature("{{ messages }} ", {{"x", 1}}, "auto", kTools), reference);
  EXPECT_NE(template_signature("{{ messages }}", {{"x", 2}}, "auto", kTools), reference);
  EXPECT_NE(template_signature("{{ messages }}", {{"x", 1}}, "required", kTools), reference);
  EXPECT_NE(template_signature("{{ messages }}", {{"x", 1}}, "auto", json::array({kTools[0]})), reference);
  EXPECT_NE(template_signature("{{ messages }}", {{"x", 1}}, "auto", nullptr), reference);
}

TEST(ApiCacheNamespace, KwargsKeyOrderDoesNotMatter) {
  const json a = json::parse(R"({"enable_thinking": true, "reasoning": {"effort": "low", "budget": 3}})");
  const json b = json::parse(R"({"reasoning": {"budget": 3, "effort": "low"}, "enable_thinking": true})");
  EXPECT_EQ(template_signature("t", a, "none", nullptr), template_signature("t", b, "none", nullptr));
}

TEST(ApiCacheNamespace, ToolKeyOrderDoesNotMatterButToolOrderDoes) {
  const json tools_a = json::parse(R"([{"type":"function","function":{"name":"a","description":"d"}}])");
  const json tools_b = json::parse(R"([{"function":{"description":"d","name":"a"},"type":"function"}])");
  EXPECT_EQ(template_signature("t", nullptr, "auto", tools_a), template_signature("t", nullptr, "auto", tools_b));
  const json reordered = json::array({kTools[1], kTools[0]});
  EXPECT_NE(template_signature("t", nullptr, "auto", kTools), template_signature("t", nullptr, "auto", reordered));
}

TEST(ApiCacheNamespace, AbsentAndEmptyKwargsAreTheSame) {
  EXPECT_EQ(template_signature("t", nullptr, "none", nullptr), template_signature("t", json::object(), "none", json::array()));
}

}  // namespace
}  // namespace prefixd::api
