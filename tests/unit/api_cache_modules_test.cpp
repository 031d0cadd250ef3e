// Module chains (api/cache_modules.h) and the key registry (api/cache_keys.h): validation with the
// offending field named, chained fingerprints, manifests, composition verdicts, and the registry's
// rules (limits, versions, what clearing a key keeps, shareable prefixes, TTL).
#include <gtest/gtest.h>

#include "api/control/cache_keys.h"
#include "api/control/cache_modules.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

json body_of(json modules) { return json{{"modules", std::move(modules)}}; }

std::string param_of(const json& modules) {
  auto parsed = parse_modules(body_of(modules));
  return parsed ? std::string("accepted") : parsed.error().param;
}

TEST(CacheModules, EveryMalformedModuleIsRefusedNamingItsField) {
  EXPECT_EQ(parse_modules(json::object()).error().param, "modules");
  EXPECT_EQ(param_of(json::array()), "modules");
  EXPECT_EQ(param_of(json::array({"system"})), "modules[0]");
  EXPECT_EQ(param_of(json::array({{{"system_prompt", "x"}}})), "modules[0].module_id");
  EXPECT_EQ(param_of(json::array({{{"module_id", "a"}}})), "modules[0]") << "nothing to prepare";
  EXPECT_EQ(param_of(json::array({{{"module_id", "a"}, {"tools", json::array()}}})), "modules[0].tools");
  EXPECT_EQ(param_of(json::array({{{"module_id", "a"}, {"messages", "hi"}}})), "modules[0].messages");
  EXPECT_EQ(param_of(json::array({{{"module_id", "a"}, {"system_prompt", "x"}, {"color", "red"}}})), "modules[0].color");
  EXPECT_EQ(param_of(json::array({{{"module_id", "a"}, {"system_prompt", "x"}}, {{"module_id", "a"}, {"system_prompt", "y"}}})),
            "modules[1].module_id")
      << "ids are unique in a chain";
  EXPECT_EQ(param_of(json::array({{{"module_id", "a"}, {"messages", json::array({{{"role", "user"}, {"content", "x"}}})}},
                                  {{"module_id", "b"}, {"system_prompt", "late"}}})),
            "modules[1].system_prompt")
      << "a system prompt only opens the conversation";
  EXPECT_EQ(param_of(json::array({{{"module_id", "a"}, {"system_prompt", "  x  "}}})), "accepted");
  EXPECT_EQ(*parse_modules(body_of(json::array({{{"module_id", "a"}, {"system_prompt", "  x \n"}}})))->front().system_prompt, "x");
}

TEST(CacheModules, FingerprintsChainEverythingBeforeThem) {
  const json sys = {{"module_id", "system"}, {"system_prompt", "Be brief."}};
  const json tools = {{"module_id", "tools"}, {"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}})}};
  const json mem = {{"module_id", "memory"}, {"messages", json::array({{{"role", "user"}, {"content", "I live in Lyon."}}})}};
  const auto chain = *parse_modules(body_of({sys, tools, mem}));
  const auto base = chain_fingerprints("root", chain);
  ASSERT_EQ(base.size(), 3u);
  EXPECT_EQ(base, chain_fingerprints("root", chain)) << "deterministic";
  EXPECT_NE(chain_fingerprints("other root", chain)[0], base[0]);

  json edited_sys = sys;
  edited_sys["system_prompt"] = "Be thorough.";
  const auto edited = chain_fingerprints("root", *parse_modules(body_of({edited_sys, tools, mem})));
  for (std::size_t k = 0; k < 3; ++k) EXPECT_NE(edited[k], base[k]) << "an edit changes every module after it, " << k;

  json edited_mem = mem;
  edited_mem["messages"][0]["content"] = "I live in Nantes.";
  const auto tail = chain_fingerprints("root", *parse_modules(body_of({sys, tools, edited_mem})));
  EXPECT_EQ(tail[0], base[0]);
  EXPECT_EQ(tail[1], base[1]);
  EXPECT_NE(tail[2], base[2]);

  const auto reordered = chain_fingerprints("root", *parse_modules(body_of({sys, mem, tools})));
  EXPECT_NE(reordered[1], base[1]) << "order is identity";

  const ChainPart part = chain_through(chain, 1);
  EXPECT_EQ(part.messages.size(), 1u);
  EXPECT_EQ(part.messages[0]["role"], "system");
  EXPECT_EQ(part.tools.size(), 1u);
  EXPECT_TRUE(chain_through(chain, 0).tools.is_null());
}

TEST(CacheModules, ManifestsRoundTripAndTheVerdictIsThreeWay) {
  ArtifactManifest manifest{.kind = "module",
                            .module = ModuleManifest{.module_id = "memory", .fingerprint = "cc", .start_offset = 120,
                                                     .end_offset = 160, .prefix_chain = {"aa", "bb"}},
                            .conversation = KeyConversation{.messages = json::array({{{"role", "user"}, {"content", "x"}}}),
                                                            .cache_salt = "s"}};
  const auto decoded = ArtifactManifest::decode(manifest.encode());
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->module->prefix_chain, manifest.module->prefix_chain);
  EXPECT_EQ(decoded->module->start_offset, 120);
  EXPECT_EQ(decoded->conversation->cache_salt, "s");

  std::string why;
  EXPECT_EQ(composition_verdict(decoded, 120, {"aa", "bb"}, &why), Composition::match);
  EXPECT_EQ(composition_verdict(decoded, 0, {}, &why), Composition::mismatch);
  EXPECT_NE(why.find("offset 120"), std::string::npos) << why;
  EXPECT_EQ(composition_verdict(decoded, 120, {"bb", "aa"}, &why), Composition::mismatch) << "a reordered chain";
  EXPECT_EQ(composition_verdict(decoded, 120, {"aa"}, &why), Composition::mismatch) << "a dropped predecessor";
  EXPECT_EQ(composition_verdict(std::nullopt, 5, {"x"}, &why), Composition::abstain) << "no manifest";
  EXPECT_EQ(composition_verdict(ArtifactManifest{.kind = "key", .key = "k"}, 5, {}, &why), Composition::abstain);
  EXPECT_FALSE(ArtifactManifest::decode("").has_value());
  EXPECT_FALSE(ArtifactManifest::decode("not json").has_value());
  EXPECT_FALSE(ArtifactManifest::decode(R"({"format":"prefixd.manifest.v1","kind":"module","module":{"module_id":1}})").has_value());
}

KeyRecord record(std::string name, std::vector<engine::Token> tokens, std::string ns = "ns") {
  KeyRecord r{.name = std::move(name), .tokens = std::move(tokens)};
  r.cache.namespace_digest = std::move(ns);
  r.cache.session_key = r.name;
  return r;
}

TEST(KeyRegistry, ClearingAKeyKeepsWhatOtherKeysAndModulesOfItsNamespaceShare) {
  KeyRegistry keys;
  ASSERT_EQ(keys.add("t", record("a", {1, 2, 3, 4, 5, 6})), KeyError::none);
  ASSERT_EQ(keys.add("t", record("b", {1, 2, 3, 9})), KeyError::none);
  ASSERT_EQ(keys.add("t", record("c", {1, 2, 3, 4, 5}, "other namespace")), KeyError::none);
  ASSERT_EQ(keys.add("u", record("d", {1, 2, 3, 4, 5})), KeyError::none);
  EXPECT_EQ(keys.add("t", record("a", {})), KeyError::exists);
  const std::vector<engine::Token> a = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(keys.shared_with_others("t", "a", "ns", a), 3) << "only b counts: c is another namespace, d another tenant";
  PreparedModule module{.fingerprint = "f", .tokens = {1, 2, 3, 4}};
  module.cache.namespace_digest = "ns";
  keys.add_module("t", module);
  EXPECT_EQ(keys.shared_with_others("t", "a", "ns", a), 4);
  EXPECT_EQ(keys.shareable_prefix("t", "ns", a), 4);
  EXPECT_EQ(keys.shareable_prefix("t", "ns", std::vector<engine::Token>{1, 2, 3}), 0) << "the whole module or nothing";
  EXPECT_EQ(keys.shareable_prefix("u", "ns", a), 0);
}

TEST(KeyRegistry, AWriterThatReadAnOlderVersionLoses) {
  KeyRegistry keys;
  ASSERT_EQ(keys.add("t", record("k", {1})), KeyError::none);
  const KeyRecord first = *keys.find("t", "k");
  KeyRecord changed = first;
  changed.tokens = {1, 2};
  EXPECT_EQ(keys.replace_if("t", changed, first.version), KeyError::none);
  changed.tokens = {1, 2, 3};
  EXPECT_EQ(keys.replace_if("t", changed, first.version), KeyError::changed);
  EXPECT_EQ(keys.find("t", "k")->tokens.size(), 2u);
  EXPECT_EQ(keys.replace_if("t", record("gone", {}), 0), KeyError::missing);
}

TEST(KeyRegistry, LimitsTtlAndForkSessions) {
  KeyRegistry keys;
  for (std::size_t i = 0; i < kMaxKeysPerTenant; ++i) ASSERT_EQ(keys.add("t", record("k" + std::to_string(i), {})), KeyError::none);
  EXPECT_EQ(keys.add("t", record("one too many", {})), KeyError::too_many);
  EXPECT_EQ(keys.add("u", record("k0", {})), KeyError::none) << "the limit is per tenant";
  EXPECT_EQ(keys.remove_all("t").size(), kMaxKeysPerTenant);

  const auto now = KeyClock::now();
  KeyRecord brief = record("brief", {1});
  brief.ttl = std::chrono::seconds(10);
  brief.last_used = now;
  ASSERT_EQ(keys.add("t", brief), KeyError::none);
  EXPECT_TRUE(keys.take_expired(now + std::chrono::seconds(9)).empty());
  keys.touch("t", "brief", now + std::chrono::seconds(9));
  EXPECT_TRUE(keys.take_expired(now + std::chrono::seconds(15)).empty()) << "use extends the TTL";
  const auto expired = keys.take_expired(now + std::chrono::seconds(19));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].first, "t");
  EXPECT_FALSE(keys.find("t", "brief").has_value());

  KeyRecord fork = record("child", {1});
  fork.cache.session_key = "parent";
  ASSERT_EQ(keys.add("t", fork), KeyError::none);
  EXPECT_EQ(keys.session_of("t", "child"), "parent");
  EXPECT_FALSE(keys.session_of("t", "stranger").has_value());
}

}  // namespace
}  // namespace prefixd::api
