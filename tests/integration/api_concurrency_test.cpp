// Many clients at once: every request completes, each output is the one it would have been
// alone (the promise of --deterministic: a stream per sequence and row-wise calls; the default pool
// lets a lone decode token take the one-row kernels, so a near-tie may fall the other way beside
// others, docs/operator-guide.md "Exactness"), and a full queue is refused with 503 instead of
// piling up, however the requests stream.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "raw_connection.h"
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
  ServerProcess server({.extra_args = {"--deterministic"}});
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

// Every request the scheduler holds, running or queued, keeps its HTTP thread until its response
// ends, and the default --http-threads has one for each (plus spare ones for requests that only
// compute). So a burst of streams up to --max-queued is taken at once, the queue fills up to its
// limit while other routes are still answered, one stream more is refused with 503 (rather than
// waiting unseen for a thread), and every stream ends.
TEST(ApiConcurrency, StreamsUpToTheQueueLimitAreTakenAtOnceAndOneMoreIsRefused) {
  constexpr int kParallel = 2;
  constexpr int kQueued = 6;
  ServerProcess server({.extra_args = {"--max-queued", std::to_string(kQueued)}, .parallel = kParallel, .ctx_size = 16384});
  auto client = server.client();
  // Long enough that the first streams still generate while the checks below run.
  auto open_stream = [&server](int i) {
    RawConnection stream(server.port());
    stream.send(json_post_bytes("/v1/completions", json{{"prompt", "Stream " + std::to_string(i)},
                                                        {"max_tokens", 1000},
                                                        {"ignore_eos", true},
                                                        {"stream", true}}
                                                       .dump(),
                                    /*close=*/true));
    return stream;
  };
  // The gauges once the scheduler has taken what it was sent (it admits on its own thread).
  auto running_and_queued = [&client](double running, double queued) {
    for (int attempt = 0; attempt < 600; ++attempt) {
      auto metrics = client->Get("/metrics");
      if (metrics && metrics->status == 200 && metric_value(metrics->body, "prefixd_requests_running") == running &&
          metric_value(metrics->body, "prefixd_requests_queued") == queued) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  std::vector<RawConnection> streams;
  std::vector<std::string> received;
  for (int i = 0; i < kQueued; ++i) streams.push_back(open_stream(i));
  // A stream's head is written once the scheduler holds its request.
  for (auto& stream : streams) {
    received.push_back(stream.read_for(std::chrono::seconds(60), 12));
    ASSERT_TRUE(received.back().starts_with("HTTP/1.1 200")) << "stream " << received.size() - 1 << ": " << received.back();
  }
  ASSERT_TRUE(running_and_queued(kParallel, kQueued - kParallel));
  // The queue fills to its limit, and /metrics is still answered while every stream holds a thread.
  for (int i = kQueued; i < kParallel + kQueued; ++i) {
    streams.push_back(open_stream(i));
    received.push_back(streams.back().read_for(std::chrono::seconds(60), 12));
    ASSERT_TRUE(received.back().starts_with("HTTP/1.1 200")) << "stream " << i << ": " << received.back();
  }
  ASSERT_TRUE(running_and_queued(kParallel, kQueued));
  RawConnection extra = open_stream(kParallel + kQueued);
  const std::string refused = extra.read_for(std::chrono::seconds(60), 12);
  EXPECT_TRUE(refused.starts_with("HTTP/1.1 503")) << refused;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    received[i] += streams[i].read_for(std::chrono::seconds(120));
    EXPECT_NE(received[i].find("\"finish_reason\":\"length\""), std::string::npos) << "stream " << i;
    EXPECT_NE(received[i].find("data: [DONE]"), std::string::npos) << "stream " << i;
  }
}

}  // namespace
}  // namespace prefixd::testing
