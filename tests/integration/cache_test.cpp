// The prompt cache seen through the real server: outcomes, namespaces, salts, sessions, stats,
// reset and metrics.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

json long_chat(const std::string& question, const json& extra = json::object()) {
  std::string system = "You are a meticulous librarian. ";
  for (int i = 0; i < 20; ++i) system += "Rule " + std::to_string(i) + ": catalogue every book by author and year. ";
  json request = {{"messages", json::array({{{"role", "system"}, {"content", system}},
                                            {{"role", "user"}, {"content", question}}})},
                  {"max_tokens", 4},
                  {"temperature", 0}};
  request.update(extra);
  return request;
}

json chat(httplib::Client& client, const json& request) {
  const auto reply = post_json(client, "/v1/chat/completions", request);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  return reply.body;
}

TEST(Cache, ResendIsServedFromTheDeviceTierWithOneFedToken) {
  ServerProcess server;
  auto client = server.client();
  const json cold = chat(*client, long_chat("Where is the atlas?"));
  EXPECT_EQ(cold["prompt_cache"]["outcome"], "cold");
  const json warm = chat(*client, long_chat("Where is the atlas?"));
  EXPECT_EQ(warm["prompt_cache"]["outcome"], "hit_extend");
  EXPECT_EQ(warm["prompt_cache"]["fed_tokens"], 1);
  EXPECT_EQ(warm["prompt_cache"]["tier"], "device");
  EXPECT_EQ(warm["usage"]["prompt_tokens_details"]["cached_tokens"], warm["usage"]["prompt_tokens"].get<int>() - 1);
  EXPECT_EQ(warm["choices"][0]["message"]["content"], cold["choices"][0]["message"]["content"]);
}

TEST(Cache, SharedSystemPromptIsReusedAcrossSessions) {
  ServerProcess server;
  auto client = server.client();
  chat(*client, long_chat("Where is the atlas?", {{"user", "alice"}}));
  const json other = chat(*client, long_chat("Who wrote the dictionary?", {{"prompt_cache_key", "bob"}}));
  EXPECT_EQ(other["prompt_cache"]["outcome"], "partial");
  EXPECT_EQ(other["prompt_cache"]["scope"], "cross_session");
  EXPECT_GT(other["prompt_cache"]["cached_tokens"].get<int>(), 200);
}

// Prompt tokens as generation would feed them (POST /tokenize with the request's messages and tools).
std::vector<int> prompt_tokens(httplib::Client& client, const json& request) {
  json body = {{"messages", request["messages"]}, {"add_generation_prompt", true}};
  if (request.contains("tools")) body["tools"] = request["tools"];
  const auto reply = post_json(client, "/tokenize", body);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  return reply.body["tokens"].get<std::vector<int>>();
}

// The namespace holds only what changes the K/V of a token sequence: a salt is a wall, while the
// template's inputs (tools, kwargs) change the prompt's tokens or nothing, and the token match
// sees either. A reused token is always the request's own.
TEST(Cache, DifferentSaltNeverHitsWhileToolsAndKwargsReuseTheTokensTheyLeaveEqual) {
  ServerProcess server;
  auto client = server.client();
  const json base = long_chat("Where is the atlas?", {{"prompt_cache_key", "s"}});
  chat(*client, base);
  for (const json& extra : {json{{"cache_salt", "tenant-2"}}, json{{"extra_body", {{"cache_salt", "tenant-3"}}}}}) {
    const json reply = chat(*client, long_chat("Where is the atlas?", extra));
    EXPECT_EQ(reply["prompt_cache"]["outcome"], "cold") << extra.dump();
    EXPECT_EQ(reply["prompt_cache"]["cached_tokens"], 0) << extra.dump();
  }
  // The tiny model's template ignores this kwarg: the same tokens, reused to the one-token guard,
  // and the response names what changed since the session's previous request.
  const json kwargs = chat(*client, long_chat("Where is the atlas?", {{"prompt_cache_key", "s"}, {"chat_template_kwargs", {{"flavour", "x"}}}}));
  EXPECT_EQ(kwargs["prompt_cache"]["cached_tokens"], kwargs["usage"]["prompt_tokens"].get<int>() - 1) << kwargs.dump();
  EXPECT_EQ(kwargs["prompt_cache"]["changed_inputs"], json::array({"chat_template_kwargs"})) << kwargs.dump();
  // Tools render into the prompt: the reuse ends at the first token they change, never past it.
  const json tools = json::array({{{"type", "function"},
                                   {"function", {{"name", "lookup"}, {"description", "find a book"},
                                                 {"parameters", {{"type", "object"}}}}}}});
  const json with_tools_request = long_chat("Where is the atlas?", {{"prompt_cache_key", "s"}, {"tools", tools}});
  const std::vector<int> plain = prompt_tokens(*client, base);
  const std::vector<int> with_tools = prompt_tokens(*client, with_tools_request);
  std::size_t common = 0;
  while (common < plain.size() && common < with_tools.size() && plain[common] == with_tools[common]) ++common;
  ASSERT_LT(common, with_tools.size() - 1) << "the tools change the rendered prompt";
  const json tooled = chat(*client, with_tools_request);
  EXPECT_EQ(tooled["usage"]["prompt_tokens"], static_cast<int>(with_tools.size()));
  EXPECT_LE(tooled["prompt_cache"]["cached_tokens"].get<int>(), static_cast<int>(common)) << tooled.dump();
  EXPECT_EQ(tooled["prompt_cache"]["changed_inputs"], json::array({"chat_template_kwargs", "tools", "tool_choice"})) << tooled.dump();
}

TEST(Cache, CachePromptFalseReadsAndWritesNothing) {
  ServerProcess server;
  auto client = server.client();
  const json first = chat(*client, long_chat("Where is the atlas?", {{"cache_prompt", false}}));
  EXPECT_EQ(first["prompt_cache"]["outcome"], "bypass");
  const json second = chat(*client, long_chat("Where is the atlas?", {{"extra_body", {{"cache_prompt", false}}}}));
  EXPECT_EQ(second["prompt_cache"]["outcome"], "bypass");
  EXPECT_EQ(get_json(*client, "/v1/cache/stats").body["tiers"]["device"]["entries"], 0) << "nothing was donated";
}

TEST(Cache, ConcurrentRequestsSharingAPrefixAllGetTheirOwnAnswer) {
  ServerProcess server;
  auto client = server.client();
  const std::vector<std::string> questions = {"Where is the atlas?", "Who wrote it?", "When was it bound?",
                                              "How many pages?"};
  std::vector<json> alone;
  {
    ServerProcess reference({.extra_args = {"--no-cache-prompt"}});
    auto ref = reference.client();
    for (const auto& q : questions) alone.push_back(chat(*ref, long_chat(q)));
  }
  std::vector<json> together(questions.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < questions.size(); ++i) {
    threads.emplace_back([&, i] {
      auto own = server.client();
      together[i] = chat(*own, long_chat(questions[i]));
    });
  }
  for (auto& t : threads) t.join();
  int fed = 0;
  for (size_t i = 0; i < questions.size(); ++i) {
    EXPECT_EQ(together[i]["choices"][0]["message"]["content"], alone[i]["choices"][0]["message"]["content"]) << i;
    fed += together[i]["prompt_cache"]["fed_tokens"].get<int>();
  }
  const int prompt = alone[0]["usage"]["prompt_tokens"].get<int>();
  EXPECT_LT(fed, 2 * prompt) << "the shared prefix was computed once, not four times";
}

TEST(Cache, StatsResetAndPrometheusMetrics) {
  ServerProcess server;
  auto client = server.client();
  chat(*client, long_chat("Where is the atlas?"));
  chat(*client, long_chat("Where is the atlas?"));
  const json stats = get_json(*client, "/v1/cache/stats").body;
  EXPECT_EQ(stats["hits"], 1);
  EXPECT_EQ(stats["misses"], 1);
  EXPECT_EQ(stats["tiers"]["device"]["entries"], 1);
  EXPECT_GT(stats["tiers"]["device"]["bytes"].get<std::int64_t>(), 0);
  EXPECT_TRUE(stats["apc_enabled"].get<bool>());
  for (const char* key : {"total_blocks_stored", "unique_block_hashes", "apc_active_entries", "evictions"}) {
    EXPECT_TRUE(stats.contains(key)) << key;
  }

  const auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metric_value(metrics->body, "prefixd_prompt_cache_hits_total"), 1);
  EXPECT_EQ(metric_value(metrics->body, "prefixd_prompt_cache_misses_total"), 1);
  EXPECT_GT(metric_value(metrics->body, "prefixd_prompt_cache_prefix_tokens_reused_total"), 200);
  EXPECT_EQ(metric_value(metrics->body, "prefixd_time_to_first_token_seconds_count"), 2);
  EXPECT_NE(metrics->body.find("prefixd_prompt_cache_evictions_total{reason=\"ttl\"}"), std::string::npos);
  EXPECT_NE(metrics->body.find("prefixd_prompt_cache_bytes{tier=\"host\"}"), std::string::npos);
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    const std::string path = "/tmp/prefixd-metrics-" + std::to_string(server.port()) + ".txt";
    std::ofstream(path) << metrics->body;
    EXPECT_EQ(std::system(("promtool check metrics < " + path + " >/dev/null 2>&1").c_str()), 0) << metrics->body;
    std::remove(path.c_str());
  }

  const auto reset = post_json(*client, "/v1/cache/reset", json::object());
  EXPECT_EQ(reset.status, 200);
  EXPECT_EQ(reset.body["freed_entries"], 1 + stats["tiers"]["host"]["entries"].get<int>());
  EXPECT_EQ(get_json(*client, "/v1/cache/stats").body["tiers"]["device"]["entries"], 0);
  EXPECT_EQ(chat(*client, long_chat("Where is the atlas?"))["prompt_cache"]["outcome"], "cold");
}

// What each response says the cache did, /v1/cache/stats and /metrics agree after every request,
// including requests that shared a prefix another request was computing.
TEST(Cache, ResponsesStatsAndMetricsAgreeOnEveryRequest) {
  ServerProcess server({.parallel = 2});
  auto client = server.client();
  std::map<std::string, int> seen;
  std::int64_t reused = 0;
  const auto check = [&](const std::string& when) {
    const json stats = get_json(*client, "/v1/cache/stats").body;
    const auto metrics = client->Get("/metrics");
    ASSERT_TRUE(metrics);
    for (const char* outcome : {"cold", "hit_extend", "hit_restore", "partial", "bypass"}) {
      const int count = seen.contains(outcome) ? seen.at(outcome) : 0;
      EXPECT_EQ(stats["outcomes"][outcome], count) << when << ": " << outcome;
      EXPECT_EQ(metric_value(metrics->body, std::string("prefixd_prompt_cache_requests_total{outcome=\"") + outcome + "\"}"),
                count)
          << when << ": " << outcome;
    }
    EXPECT_EQ(stats["tokens_reused"], reused) << when;
    EXPECT_EQ(metric_value(metrics->body, "prefixd_prompt_cache_prefix_tokens_reused_total"), static_cast<double>(reused));
  };
  const auto send = [&](const json& request) {
    const json reply = chat(*client, request);
    seen[reply["prompt_cache"]["outcome"].get<std::string>()] += 1;
    reused += reply["prompt_cache"]["cached_tokens"].get<std::int64_t>();
    check(request.dump().substr(0, 80));
  };
  send(long_chat("Where is the atlas?"));
  send(long_chat("Where is the atlas?"));
  send(long_chat("Who wrote the almanac?", {{"user", "someone-else"}}));
  send(long_chat("Where is the atlas?", {{"cache_prompt", false}}));
  send(long_chat("Where is the atlas?", {{"cache_salt", "tenant-b"}}));
  // Two at once with one long new prefix: the second may wait for the first's prefill.
  std::string story = "Chapter one. ";
  for (int i = 0; i < 40; ++i) story += "The archivist moved shelf " + std::to_string(i) + " to the east wing. ";
  std::vector<std::thread> threads;
  std::vector<json> replies(2);
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      auto own = server.client();
      replies[static_cast<size_t>(i)] = chat(*own, long_chat(story + (i == 0 ? "First?" : "Second?")));
    });
  }
  for (auto& t : threads) t.join();
  for (const json& reply : replies) {
    seen[reply["prompt_cache"]["outcome"].get<std::string>()] += 1;
    reused += reply["prompt_cache"]["cached_tokens"].get<std::int64_t>();
  }
  check("after the concurrent pair");
  EXPECT_GE(seen["hit_extend"] + seen["partial"] + seen["hit_restore"], 3);
  EXPECT_EQ(seen["bypass"], 1);
}

// curl -d sends JSON as form data by default: the body is read as JSON whatever its type says,
// whatever its size.
TEST(Cache, LargeJsonBodySentAsFormDataIsServed) {
  ServerProcess server;
  auto client = server.client();
  const std::string body = json{{"prompt", "a"}, {"max_tokens", 1}, {"padding", std::string(20000, 'p')}}.dump();
  const auto reply = client->Post("/v1/completions", body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200) << reply->body;
}

}  // namespace
}  // namespace prefixd::testing
