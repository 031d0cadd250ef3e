// Prepared module chains and artifacts with manifests against the real server: a chain prepared
// once serves the first request that starts with it; save, restart, load, hit; a composition
// mismatch refuses a load before anything exists; under session isolation a prepared chain is the
// prefix sessions share; a hybrid model resumes at the chain's checkpoints.
#include <gtest/gtest.h>

#include <filesystem>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kSystem =
    "You are the planning agent of a travel company. You answer with short numbered steps, you never invent prices, "
    "and you call a tool whenever a fact about weather or trains is needed.";

json weather_tool() {
  return json::array({{{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"description", "Current weather for a city"},
                         {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}}}}}}});
}

json memory_messages(const std::string& fact) {
  return json::array({{{"role", "user"}, {"content", "Remember this: " + fact}}, {{"role", "assistant"}, {"content", "Noted."}}});
}

json chain(const std::string& fact) {
  return json{{"modules", json::array({{{"module_id", "system"}, {"system_prompt", kSystem}},
                                       {{"module_id", "tools"}, {"tools", weather_tool()}},
                                       {{"module_id", "memory"}, {"messages", memory_messages(fact)}}})}};
}

// A chat request made of the chain and one new user message.
json chat_after_chain(const std::string& fact, const std::string& question, const std::string& session = {}) {
  json messages = json::array({{{"role", "system"}, {"content", kSystem}}});
  for (const auto& m : memory_messages(fact)) messages.push_back(m);
  messages.push_back({{"role", "user"}, {"content", question}});
  json body{{"messages", messages}, {"tools", weather_tool()}, {"max_tokens", 2}};
  if (!session.empty()) body["prompt_cache_key"] = session;
  return body;
}

int cached_of(const JsonReply& reply) { return reply.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); }

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("prefixd-modules-" + std::to_string(::getpid()) + "-" + std::to_string(next_++))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int next_ = 0;
  fs::path path_;
};

TEST(CacheModules, APreparedChainLeavesTheFirstRequestOnlyItsOwnMessageToFeed) {
  ServerProcess server;
  auto client = server.client();
  const auto prepared = post_json(*client, "/v1/cache/prepare_modules", chain("I live in Lyon."));
  ASSERT_EQ(prepared.status, 200) << prepared.raw;
  const json& modules = prepared.body["modules"];
  ASSERT_EQ(modules.size(), 3u);
  const int chain_tokens = prepared.body["tokens"].get<int>();
  EXPECT_EQ(modules[2]["end_offset"].get<int>(), chain_tokens);
  for (std::size_t k = 1; k < modules.size(); ++k) {
    EXPECT_EQ(modules[k]["start_offset"], modules[k - 1]["end_offset"]) << "modules tile the chain";
    EXPECT_NE(modules[k]["fingerprint"], modules[k - 1]["fingerprint"]);
  }
  // This template closes the system turn before the tools join it, so the system module alone is
  // not a prefix of the chain: reported, not hidden.
  EXPECT_EQ(modules[0]["sound"], false);
  EXPECT_EQ(modules[1]["sound"], true);

  const auto first = post_json(*client, "/v1/chat/completions", chat_after_chain("I live in Lyon.", "Plan a day in Rome."));
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_EQ(cached_of(first), chain_tokens) << "the whole chain came from the cache";
  EXPECT_EQ(first.body["prompt_cache"]["fed_tokens"].get<int>(), first.body["usage"]["prompt_tokens"].get<int>() - chain_tokens);

  // Editing the memory module changes its fingerprint, not those before it.
  const auto edited = post_json(*client, "/v1/cache/prepare_modules", chain("I live in Nantes."));
  ASSERT_EQ(edited.status, 200) << edited.raw;
  EXPECT_EQ(edited.body["modules"][1]["fingerprint"], modules[1]["fingerprint"]);
  EXPECT_NE(edited.body["modules"][2]["fingerprint"], modules[2]["fingerprint"]);
  EXPECT_GE(edited.body["cached_tokens"].get<int>(), modules[1]["end_offset"].get<int>()) << "only the memory was fed";

  const auto bad = post_json(*client, "/v1/cache/prepare_modules",
                             {{"modules", json::array({{{"module_id", "a"}, {"tools", json::array()}}})}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["param"], "modules[0].tools");
}

TEST(CacheModules, SavedKeySurvivesARestartAndHitsAfterLoad) {
  TempDir dir;
  const std::vector<std::string> args = {"--cache-artifact-path", (dir.path() / "artifacts").string()};
  json conversation = json::array({{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", "Plan a week in Peru."}}});
  int key_tokens = 0;
  {
    ServerProcess server({.extra_args = args});
    auto client = server.client();
    const auto set = post_json(*client, "/v1/cache/set", {{"key", "peru"}, {"messages", conversation}});
    ASSERT_EQ(set.status, 200) << set.raw;
    key_tokens = set.body["tokens"].get<int>();
    const auto saved = post_json(*client, "/v1/cache/save", {{"name", "peru-trip"}, {"key", "peru"}});
    ASSERT_EQ(saved.status, 200) << saved.raw;
    EXPECT_EQ(saved.body["kind"], "key");
    EXPECT_EQ(saved.body["tokens"].get<int>(), key_tokens);
  }
  ServerProcess restarted({.extra_args = args});
  auto client = restarted.client();
  const auto loaded = post_json(*client, "/v1/cache/load", {{"name", "peru-trip"}, {"key", "peru"}});
  ASSERT_EQ(loaded.status, 200) << loaded.raw;
  EXPECT_EQ(loaded.body["composition"], "abstain") << "a key's artifact has no module axis";
  EXPECT_EQ(post_json(*client, "/v1/cache/token_count", {{"key", "peru"}}).body["token_count"].get<int>(), key_tokens);
  conversation.push_back({{"role", "assistant"}, {"content", "Lima, Cusco, Machu Picchu."}});
  conversation.push_back({{"role", "user"}, {"content", "And the weather?"}});
  const auto hit = post_json(*client, "/v1/chat/completions", {{"messages", conversation}, {"max_tokens", 2}, {"prompt_cache_key", "peru"}});
  ASSERT_EQ(hit.status, 200) << hit.raw;
  EXPECT_GE(cached_of(hit), key_tokens) << hit.raw;
  EXPECT_EQ(hit.body["prompt_cache"]["tier"], "host");
  // The loaded key is a key like any other: it can grow.
  EXPECT_EQ(post_json(*client, "/v1/cache/update", {{"key", "peru"}, {"messages", json::array({{{"role", "assistant"}, {"content", "Ok."}}})}}).status,
            200);
}

TEST(CacheModules, ACompositionMismatchRefusesTheLoadBeforeAnythingExists) {
  TempDir dir;
  ServerProcess server({.extra_args = {"--cache-artifact-path", (dir.path() / "artifacts").string()}});
  auto client = server.client();
  const auto prepared = post_json(*client, "/v1/cache/prepare_modules", chain("I am vegetarian."));
  ASSERT_EQ(prepared.status, 200) << prepared.raw;
  const json memory = prepared.body["modules"][2];
  const auto saved = post_json(*client, "/v1/cache/save", {{"name", "memory-bloc"}, {"module", memory["fingerprint"]}});
  ASSERT_EQ(saved.status, 200) << saved.raw;
  EXPECT_EQ(saved.body["kind"], "module");
  ASSERT_EQ(post_json(*client, "/v1/cache/reset", json::object()).status, 200);
  const json host_before = get_json(*client, "/v1/cache/stats").body["tiers"]["host"];

  // Adopted at offset 0 behind no modules (the defaults): not what it was prepared for.
  const auto refused = post_json(*client, "/v1/cache/load", {{"name", "memory-bloc"}, {"key", "adopted"}});
  EXPECT_EQ(refused.status, 409) << refused.raw;
  EXPECT_EQ(refused.body["code"], "prompt_cache_error");
  EXPECT_EQ(refused.body["reason"], "composition_mismatch");
  EXPECT_EQ(get_json(*client, "/v1/cache/meta?key=adopted").status, 404) << "the key was never created";
  EXPECT_EQ(get_json(*client, "/v1/cache/stats").body["tiers"]["host"], host_before) << "nothing was stored";

  // The right offset behind a reordered chain is refused too.
  const json chain_before = {prepared.body["modules"][0]["fingerprint"], prepared.body["modules"][1]["fingerprint"]};
  const json reordered = {chain_before[1], chain_before[0]};
  EXPECT_EQ(post_json(*client, "/v1/cache/load",
                      {{"name", "memory-bloc"}, {"key", "adopted"}, {"at_offset", memory["start_offset"]}, {"prefix_chain", reordered}})
                .status,
            409);
  EXPECT_EQ(get_json(*client, "/v1/cache/meta?key=adopted").status, 404);

  const auto adopted = post_json(*client, "/v1/cache/load",
                                 {{"name", "memory-bloc"}, {"key", "adopted"}, {"at_offset", memory["start_offset"]},
                                  {"prefix_chain", chain_before}});
  ASSERT_EQ(adopted.status, 200) << adopted.raw;
  EXPECT_EQ(adopted.body["composition"], "match");
  EXPECT_EQ(post_json(*client, "/v1/cache/token_count", {{"key", "adopted"}}).body["token_count"], prepared.body["tokens"]);
}

TEST(CacheModules, UnderSessionIsolationAPreparedChainIsWhatSessionsShare) {
  ServerProcess server({.extra_args = {"--cache-isolation", "session"}});
  auto client = server.client();
  // Without a prepared chain, one session's prefix is not another's.
  ASSERT_EQ(post_json(*client, "/v1/chat/completions", chat_after_chain("I like trains.", "Plan a day.", "s1")).status, 200);
  EXPECT_EQ(cached_of(post_json(*client, "/v1/chat/completions", chat_after_chain("I like trains.", "Plan a night.", "s2"))), 0);

  const auto prepared = post_json(*client, "/v1/cache/prepare_modules", chain("I like boats."));
  ASSERT_EQ(prepared.status, 200) << prepared.raw;
  const int chain_tokens = prepared.body["tokens"].get<int>();
  EXPECT_EQ(cached_of(post_json(*client, "/v1/chat/completions", chat_after_chain("I like boats.", "Plan a day.", "s3"))), chain_tokens);
  EXPECT_EQ(cached_of(post_json(*client, "/v1/chat/completions", chat_after_chain("I like boats.", "Plan a night.", "s4"))), chain_tokens)
      << "every session shares the chain, and nothing past it";
}

TEST(CacheModules, AHybridModelResumesAtTheChainsCheckpoints) {
  ServerProcess server({.model = std::string(PREFIXD_TEST_MODELS_DIR) + "/qwen35-tiny.gguf", .parallel = 1});
  auto client = server.client();
  const auto prepared = post_json(*client, "/v1/cache/prepare_modules", chain("I travel with a dog."));
  ASSERT_EQ(prepared.status, 200) << prepared.raw;
  const int chain_tokens = prepared.body["tokens"].get<int>();
  EXPECT_EQ(cached_of(post_json(*client, "/v1/chat/completions", chat_after_chain("I travel with a dog.", "Plan a day."))), chain_tokens);
  // Another memory behind the same system and tools resumes at the tools module's checkpoint.
  const auto other = post_json(*client, "/v1/chat/completions", chat_after_chain("I travel by bike.", "Plan a day."));
  EXPECT_EQ(cached_of(other), prepared.body["modules"][1]["end_offset"].get<int>()) << other.raw;
}

}  // namespace
}  // namespace prefixd::testing
