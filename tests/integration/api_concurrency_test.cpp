// Many clients at once: every request completes, each output is the one it would have been
// alone, and a full queue is refused with 503 instead of piling up.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <string>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

json greedy_chat(const std::string& content, int max_tokens) {
  return {{"model", "tiny"},
          {"messages", json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

TEST(ApiConcurrency, ConcurrentRequestsMatchTheirSoloRuns) {
  ServerProcess server;
  const std::vector<std::string> prompts = {"Tell me about cats", "What is two plus two?", "Write a haiku",
                                            "List three colors",  "Say something odd",     "Explain rain"};
  std::vector<std::string> alone;
  {
    auto client = server.client();
    for (const auto& prompt : prompts) {
      const auto reply = post_json(*client, "/v1/chat/completions", greedy_chat(prompt, 24));
      ASSERT_EQ(reply.status, 200) << reply.raw;
      alone.push_back(reply.body["choices"][0]["message"]["content"]);
    }
  }
  std::vector<std::future<JsonReply>> together;
  for (const auto& prompt : prompts) {
    together.push_back(std::async(std::launch::async, [&server, prompt] {
      auto client = server.client();
      return post_json(*client, "/v1/chat/completions", greedy_chat(prompt, 24));
    }));
  }
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const auto reply = together[i].get();
    ASSERT_EQ(reply.status, 200) << reply.raw;
    EXPECT_EQ(reply.body["choices"][0]["message"]["content"], alone[i]) << "prompt: " << prompts[i];
  }
}

TEST(ApiConcurrency, FullQueueIsRefusedWith503) {
  ServerProcess server({.extra_args = {"--max-queued", "1"}, .parallel = 1});
  constexpr int kClients = 8;
  std::vector<std::future<JsonReply>> replies;
  for (int i = 0; i < kClients; ++i) {
    replies.push_back(std::async(std::launch::async, [&server, i] {
      auto client = server.client();
      return post_json(*client, "/v1/completions",
                       {{"prompt", "Flood " + std::to_string(i)}, {"max_tokens", 300}, {"temperature", 0}});
    }));
  }
  std::map<int, int> by_status;
  for (auto& reply : replies) {
    const auto r = reply.get();
    ++by_status[r.status];
    if (r.status == 503) {
      EXPECT_TRUE(r.body.contains("error")) << r.raw;
      EXPECT_EQ(r.body["error"]["type"], "server_error");
    }
  }
  EXPECT_GE(by_status[503], 1);
  EXPECT_GE(by_status[200], 1);
  EXPECT_EQ(by_status[200] + by_status[503], kClients) << "only 200 and 503 are acceptable";
  auto client = server.client();
  EXPECT_EQ(post_json(*client, "/v1/completions", {{"prompt", "after"}, {"max_tokens", 2}}).status, 200);
}

}  // namespace
}  // namespace prefixd::testing
