// Server options that change the API's behaviour: auth (flag and environment), the model alias,
// prompt-cache bypass, turning metrics off, and the model fingerprint cache across restarts.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

const json kCompletion = {{"prompt", "Hello"}, {"max_tokens", 2}, {"temperature", 0}};

void expect_key_required(ServerProcess& server, const std::string& key) {
  auto open = server.client();
  EXPECT_EQ(get_json(*open, "/health").status, 200);

  const auto missing = get_json(*open, "/v1/models");
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.body["error"]["code"], "invalid_api_key");
  EXPECT_EQ(post_json(*open, "/v1/completions", kCompletion).status, 401);

  auto wrong = server.client(key + "x");
  EXPECT_EQ(get_json(*wrong, "/v1/models").status, 401);

  auto right = server.client(key);
  EXPECT_EQ(get_json(*right, "/v1/models").status, 200);
  EXPECT_EQ(post_json(*right, "/v1/completions", kCompletion).status, 200);
  EXPECT_EQ(get_json(*right, "/metrics").status, 200);
}

TEST(ApiOptions, ApiKeyFlagRequiresTheBearerKey) {
  ServerProcess server({.extra_args = {"--api-key", "test-key-1"}});
  expect_key_required(server, "test-key-1");
}

TEST(ApiOptions, ApiKeyFromTheEnvironment) {
  ServerProcess server({.env = {{"PREFIXD_API_KEY", "env-key-2"}}});
  expect_key_required(server, "env-key-2");
}

TEST(ApiOptions, AliasIsTheServedModelId) {
  ServerProcess server({.extra_args = {"--alias", "my-model"}});
  auto client = server.client();
  EXPECT_EQ(get_json(*client, "/v1/models").body["data"][0]["id"], "my-model");
  json request = kCompletion;
  request["model"] = "my-model";
  const auto reply = post_json(*client, "/v1/completions", request);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(reply.body["model"], "my-model");
  request["model"] = "someone-else";
  EXPECT_EQ(post_json(*client, "/v1/completions", request).status, 404);
}

TEST(ApiOptions, NoCachePromptBypassesEveryRequest) {
  ServerProcess server({.extra_args = {"--no-cache-prompt"}});
  auto client = server.client();
  json request = kCompletion;
  request["cache_prompt"] = true;  // the server-wide switch wins
  for (int i = 0; i < 2; ++i) {
    const auto reply = post_json(*client, "/v1/completions", request);
    ASSERT_EQ(reply.status, 200) << reply.raw;
    EXPECT_EQ(reply.body["prompt_cache"]["outcome"], "bypass");
    EXPECT_EQ(reply.body["prompt_cache"]["cached_tokens"], 0);
  }
  const auto chat = post_json(*client, "/v1/chat/completions",
                              {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 2}});
  ASSERT_EQ(chat.status, 200) << chat.raw;
  EXPECT_EQ(chat.body["prompt_cache"]["outcome"], "bypass");
}

// --seed: a request that sends no seed samples with the server's; one that sends its own uses it.
// Sampling at temperature 1 over the tiny model's random logits, each reply computed cold.
TEST(ApiOptions, SeedFlagSeedsEveryRequestThatSendsNone) {
  const auto reply_text = [](ServerProcess& server, json extra) {
    json request = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 1.0}, {"cache_prompt", false}};
    for (auto& [key, value] : extra.items()) request[key] = value;
    const auto reply = post_json(*server.client(), "/v1/completions", request);
    EXPECT_EQ(reply.status, 200) << reply.raw;
    return reply.body["choices"][0]["text"].get<std::string>();
  };
  ServerProcess seeded({.extra_args = {"--seed", "11"}});
  const std::string first = reply_text(seeded, {});
  EXPECT_EQ(reply_text(seeded, {}), first) << "the same server seed, the same reply";
  EXPECT_EQ(reply_text(seeded, {{"seed", 11}}), first) << "the server's seed is the one a request could send";
  // Other seeds give other replies: at least one of five differs from the seed-11 reply.
  bool differs = false;
  for (int seed = 1; seed <= 5 && !differs; ++seed) differs = reply_text(seeded, {{"seed", seed}}) != first;
  EXPECT_TRUE(differs) << "the seed reaches the sampler";
  ServerProcess from_env({.env = {{"PREFIXD_SEED", "11"}}});
  EXPECT_EQ(reply_text(from_env, {}), first) << "PREFIXD_SEED sets it too";
}

TEST(ApiOptions, CachePromptFalseBypassesOneRequest) {
  ServerProcess server;
  auto client = server.client();
  json request = kCompletion;
  request["cache_prompt"] = false;
  EXPECT_EQ(post_json(*client, "/v1/completions", request).body["prompt_cache"]["outcome"], "bypass");
  request.erase("cache_prompt");
  request["extra_body"] = {{"cache_prompt", false}};
  EXPECT_EQ(post_json(*client, "/v1/completions", request).body["prompt_cache"]["outcome"], "bypass");
  request.erase("extra_body");
  EXPECT_NE(post_json(*client, "/v1/completions", request).body["prompt_cache"]["outcome"], "bypass");
}

TEST(ApiOptions, MetricsCanBeTurnedOff) {
  ServerProcess server({.extra_args = {"--no-metrics"}});
  auto client = server.client();
  auto res = client->Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

TEST(ApiOptions, ModelFingerprintIsComputedOnceThenReadFromTheCacheFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("prefixd-fingerprint-cache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::filesystem::path cache = dir / "nested" / "model-fingerprints.tsv";
  const std::string computed_log = [&] {
    ServerProcess server({.extra_args = {"--model-fingerprint-cache", cache.string()}});
    return server.log();
  }();
  EXPECT_NE(computed_log.find("computed in"), std::string::npos) << computed_log;
  ASSERT_TRUE(std::filesystem::exists(cache)) << "the directory is created and the digest written";
  std::ifstream in(cache);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_NE(text.find(std::filesystem::canonical(PREFIXD_TINY_MODEL).string()), std::string::npos) << text;

  // From the environment this time: the restart reads the digest back instead of hashing.
  ServerProcess restarted({.env = {{"PREFIXD_MODEL_FINGERPRINT_CACHE", cache.string()}}});
  EXPECT_NE(restarted.log().find("from the cache"), std::string::npos) << restarted.log();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace prefixd::testing
