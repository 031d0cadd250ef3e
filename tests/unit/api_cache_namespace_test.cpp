// The cache namespace digest: whatever changes the K/V of a token sequence changes the digest, and
// nothing else does; the template inputs are a diagnostic beside it.
#include <gtest/gtest.h>

#include "api/prompt/cache_namespace.h"
#include "util/hex.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

const json kTools = json::array({{{"type", "function"}, {"function", {{"name", "a"}}}},
                                 {{"type", "function"}, {"function", {{"name", "b"}}}}});

NamespaceFields base() {
  return NamespaceFields{.model_id = "fingerprint-1", .tenant = "default"};
}

TEST(ApiCacheNamespace, DigestIs32BytesAndDeterministic) {
  EXPECT_EQ(namespace_digest(base()).size(), 32u);
  EXPECT_EQ(namespace_digest(base()), namespace_digest(base()));
  EXPECT_EQ(util::to_hex(namespace_digest(base())).size(), 64u);
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
  EXPECT_NE(changed([](NamespaceFields& f) { f.runtime_signature = "rope.scaling.type=yarn;"; }), reference);
  EXPECT_NE(changed([](NamespaceFields& f) { f.multimodal_digest = "image:abc"; }), reference);
  EXPECT_NE(changed([](NamespaceFields& f) { f.tenant = "tenant-a"; }), reference);
  EXPECT_NE(changed([](NamespaceFields& f) { f.cache_salt = "salt-a"; }), reference);
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
  a.cache_salt = "salt-a";
  b.cache_salt = "salt-b";
  EXPECT_NE(namespace_digest(a), namespace_digest(b));
}

TEST(ApiCacheNamespace, NoSaltCanJoinAnotherTenant) {
  // The tenant and the client's salt are separate fields: no choice of salt by tenant "a" (not
  // one spelling out tenant "b"'s id) gives one of b's digests.
  NamespaceFields b = base();
  b.tenant = "b";
  const std::string plain_b = namespace_digest(b);
  b.cache_salt = "x";
  const std::string salted_b = namespace_digest(b);
  for (const char* salt : {"b", "ab", "a", "default", "x"}) {
    NamespaceFields a = base();
    a.tenant = "a";
    a.cache_salt = salt;
    EXPECT_NE(namespace_digest(a), plain_b) << salt;
    EXPECT_NE(namespace_digest(a), salted_b) << salt;
  }
  NamespaceFields empty_tenant = base();
  empty_tenant.tenant = "";
  empty_tenant.cache_salt = "b";
  EXPECT_NE(namespace_digest(empty_tenant), plain_b);
}

TEST(ApiCacheNamespace, AnAbsentSaltDiffersFromAnEmptyOne) {
  NamespaceFields absent = base();
  NamespaceFields empty = base();
  empty.cache_salt = "";
  EXPECT_NE(namespace_digest(absent), namespace_digest(empty));
}

// The inputs a diagnostic compares: each one's digest moves with it alone.
std::vector<std::string> differing(const std::vector<std::pair<std::string, std::uint64_t>>& a,
                                   const std::vector<std::pair<std::string, std::uint64_t>>& b) {
  std::vector<std::string> out;
  EXPECT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    if (a[i].second != b[i].second) out.push_back(a[i].first);
  }
  return out;
}

using Names = std::vector<std::string>;

TEST(ApiCacheNamespace, TemplateInputsNameSourceKwargsToolsAndToolChoiceApart) {
  const auto reference = template_inputs("{{ messages }}", {{"x", 1}}, "auto", kTools);
  EXPECT_EQ(differing(template_inputs("{{ messages }} ", {{"x", 1}}, "auto", kTools), reference), Names{"chat_template"});
  EXPECT_EQ(differing(template_inputs("{{ messages }}", {{"x", 2}}, "auto", kTools), reference), Names{"chat_template_kwargs"});
  EXPECT_EQ(differing(template_inputs("{{ messages }}", {{"x", 1}}, "required", kTools), reference), Names{"tool_choice"});
  EXPECT_EQ(differing(template_inputs("{{ messages }}", {{"x", 1}}, "auto", json::array({kTools[0]})), reference), Names{"tools"});
  EXPECT_EQ(differing(template_inputs("{{ messages }}", {{"x", 1}}, "auto", nullptr), reference), Names{"tools"});
  EXPECT_NE(raw_completion_inputs()[0].second, reference[0].second) << "a raw completion is told apart from a template";
}

// The template prints kwargs and tools with their keys in the order sent, so reordering keys
// changes the prompt: the diagnostic names the input that did it.
TEST(ApiCacheNamespace, KwargsKeyOrderIsPartOfTheInput) {
  using nlohmann::ordered_json;
  const auto a = ordered_json::parse(R"({"enable_thinking": true, "reasoning": {"effort": "low", "budget": 3}})");
  const auto b = ordered_json::parse(R"({"reasoning": {"budget": 3, "effort": "low"}, "enable_thinking": true})");
  EXPECT_EQ(differing(template_inputs("t", a, "none", nullptr), template_inputs("t", b, "none", nullptr)),
            Names{"chat_template_kwargs"});
  EXPECT_EQ(template_inputs("t", a, "none", nullptr), template_inputs("t", ordered_json::parse(a.dump()), "none", nullptr));
}

TEST(ApiCacheNamespace, ToolKeyOrderAndToolOrderArePartOfTheInput) {
  using nlohmann::ordered_json;
  const auto tools_a = ordered_json::parse(R"([{"type":"function","function":{"name":"a","description":"d"}}])");
  const auto tools_b = ordered_json::parse(R"([{"function":{"description":"d","name":"a"},"type":"function"}])");
  EXPECT_EQ(differing(template_inputs("t", nullptr, "auto", tools_a), template_inputs("t", nullptr, "auto", tools_b)),
            Names{"tools"});
  const json reordered = json::array({kTools[1], kTools[0]});
  EXPECT_NE(template_inputs("t", nullptr, "auto", kTools), template_inputs("t", nullptr, "auto", reordered));
}

TEST(ApiCacheNamespace, AbsentAndEmptyKwargsAndToolsAreTheSame) {
  EXPECT_EQ(template_inputs("t", nullptr, "none", nullptr), template_inputs("t", json::object(), "none", json::array()));
}

}  // namespace
}  // namespace prefixd::api
