// A request the cache mostly holds does not wait behind a cold prefill that holds the cells it
// needs: the prefill gives way, its computed K/V goes to the cache, the hit is served, and the
// prefill resumes where it stopped and answers exactly as it would have alone.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

std::string text_of(const std::string& topic, int sentences) {
  std::string text;
  for (int i = 0; i < sentences; ++i) text += "The " + topic + " register keeps entry " + std::to_string(i) + " in its ledger. ";
  return text;
}

json chat_body(const std::string& content, int max_tokens) {
  return {{"model", "tiny"}, {"messages", json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", max_tokens}, {"temperature", 0}};
}

// Small prefill chunks make the cold prompt's prefill many steps long; the context holds the cold
// prompt or the cached one, never both.
ServerConfig config() { return ServerConfig{.extra_args = {"--batch-size", "32"}, .parallel = 2, .ctx_size = 4096}; }

TEST(PrefillPreemption, AHitDoesNotWaitBehindAColdPrefillWhichResumesWhereItStopped) {
  const std::string cached_text = text_of("harbour", 90);
  const std::string cold_text = text_of("mountain", 180);
  const json cold_body = chat_body(cold_text, 8);

  std::string alone;  // the cold prompt's answer on a server where nothing preempts it
  int cold_tokens = 0, cached_tokens = 0;
  {
    ServerProcess reference(config());
    auto client = reference.client();
    const auto reply = post_json(*client, "/v1/chat/completions", cold_body);
    ASSERT_EQ(reply.status, 200) << reply.body;
    alone = reply.body["choices"][0]["message"]["content"];
    cold_tokens = reply.body["usage"]["prompt_tokens"];
    const auto hit = post_json(*client, "/v1/chat/completions", chat_body(cached_text, 1));
    cached_tokens = hit.body["usage"]["prompt_tokens"];
  }
  ASSERT_GT(cold_tokens + cached_tokens + 2, 4096) << "the two must not fit together";
  ASSERT_LT(cold_tokens + 1, 4096);

  ServerProcess server(config());
  auto client = server.client();
  ASSERT_EQ(post_json(*client, "/v1/chat/completions", chat_body(cached_text, 1)).status, 200);

  // The cold prompt, streamed with its progress: the hit is sent once its prefill is under way.
  std::mutex mutex;
  std::string streamed;
  std::atomic<bool> under_way = false;
  std::atomic<bool> cold_done = false;
  std::thread cold([&] {
    auto cold_client = server.client();
    json body = cold_body;
    body["stream"] = true;
    body["return_progress"] = true;
    cold_client->Post("/v1/chat/completions", httplib::Headers{}, body.dump(), "application/json",
                      [&](const char* data, std::size_t size) {
                        std::lock_guard lock(mutex);
                        streamed.append(data, size);
                        if (streamed.find("\"processed\":64") != std::string::npos) under_way = true;
                        return true;
                      });
    cold_done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!under_way && !cold_done && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(under_way.load()) << "the cold prefill never reported progress";
  const auto hit = post_json(*client, "/v1/chat/completions", chat_body(cached_text, 4));
  const bool cold_finished_first = cold_done;
  cold.join();
  ASSERT_EQ(hit.status, 200) << hit.body;
  EXPECT_FALSE(cold_finished_first) << "the hit waited for the cold prefill";
  EXPECT_EQ(hit.body["prompt_cache"]["cached_tokens"], cached_tokens - 1) << hit.body["prompt_cache"].dump();

  std::string content;
  int resumed_from = 0;
  for (const std::string& payload : sse_payloads(streamed)) {
    if (payload == "[DONE]") continue;
    const json chunk = json::parse(payload);
    if (chunk.contains("prompt_progress")) resumed_from = std::max(resumed_from, chunk["prompt_progress"]["cache"].get<int>());
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(content, alone) << "the resumed prefill answers as it does alone";
  EXPECT_GE(resumed_from, 64) << "it resumed from what it had computed, not from the start";
  const auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metric_value(metrics->body, "prefixd_prefill_preemptions_total"), 1);
}

}  // namespace
}  // namespace prefixd::testing
