// Server-sent event streams from the real binary: chunk shapes, the final usage, [DONE], and what
// happens when the client goes away in the middle.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

json chat_request(const std::string& content, int max_tokens, bool stream) {
  return {{"model", "tiny"},
          {"messages", json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", stream}};
}

struct Streamed {
  int status = 0;
  std::string content_type;
  std::vector<json> chunks;
  bool done = false;  // saw data: [DONE] as the last payload
};

Streamed stream(httplib::Client& client, const std::string& path, const json& body) {
  Streamed out;
  auto res = client.Post(path, body.dump(), "application/json");
  if (!res) return out;
  out.status = res->status;
  out.content_type = res->get_header_value("Content-Type");
  const auto payloads = sse_payloads(res->body);
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    if (payloads[i] == "[DONE]") {
      out.done = i + 1 == payloads.size();
      continue;
    }
    out.chunks.push_back(json::parse(payloads[i]));
  }
  return out;
}

class ApiStreaming : public ::testing::Test {
 protected:
  // Flash attention off: its CPU kernel rounds to f16, which moves a warm resend's log-probabilities
  // by about 2e-3 (CacheOnTinyModel.WarmDeviceHitMatchesColdLogitsWithFlashAttention); here they are
  // compared to 1e-3, which measures the cache's own exactness.
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(ServerConfig{.extra_args = {"--no-flash-attn"}});
    client_ = server_->client();
  }
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ApiStreaming, ChatStreamHasRoleDeltasFinishUsageAndDone) {
  const auto s = stream(*client_, "/v1/chat/completions", chat_request("Stream this", 12, true));
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(s.content_type, "text/event-stream");
  EXPECT_TRUE(s.done);
  ASSERT_GE(s.chunks.size(), 2u);
  const std::string id = s.chunks.front()["id"];
  EXPECT_TRUE(id.starts_with("chatcmpl-"));
  EXPECT_EQ(s.chunks.front()["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (std::size_t i = 0; i < s.chunks.size(); ++i) {
    const json& chunk = s.chunks[i];
    EXPECT_EQ(chunk["id"], id);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["model"], "tiny");
    ASSERT_EQ(chunk["choices"].size(), 1u);
    const json& choice = chunk["choices"][0];
    if (i + 1 < s.chunks.size()) {
      EXPECT_TRUE(choice["finish_reason"].is_null()) << chunk;
      if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    }
  }
  const json& last = s.chunks.back();
  EXPECT_TRUE(last["choices"][0]["finish_reason"] == "stop" || last["choices"][0]["finish_reason"] == "length");
  EXPECT_GT(last["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_LE(last["usage"]["completion_tokens"].get<int>(), 12);
  EXPECT_TRUE(last.contains("prompt_cache"));
  EXPECT_TRUE(last.contains("timings"));

  // Streaming changes the framing, not the text.
  const auto whole = post_json(*client_, "/v1/chat/completions", chat_request("Stream this", 12, false));
  ASSERT_EQ(whole.status, 200);
  EXPECT_EQ(json(text), whole.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(last["usage"], whole.body["usage"]);
}

TEST_F(ApiStreaming, IncludeUsageAddsAUsageOnlyChunk) {
  json body = chat_request("Count", 6, true);
  body["stream_options"] = {{"include_usage", true}};
  const auto s = stream(*client_, "/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200);
  ASSERT_TRUE(s.done);
  ASSERT_GE(s.chunks.size(), 3u);
  const json& usage_chunk = s.chunks.back();
  EXPECT_EQ(usage_chunk["choices"], json::array());
  EXPECT_GT(usage_chunk["usage"]["total_tokens"].get<int>(), 0);
  const json& finish_chunk = s.chunks[s.chunks.size() - 2];
  EXPECT_FALSE(finish_chunk["choices"][0]["finish_reason"].is_null());
}

TEST_F(ApiStreaming, CompletionStreamCarriesText) {
  const auto s = stream(*client_, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 8}, {"temperature", 0}, {"stream", true}});
  ASSERT_EQ(s.status, 200);
  ASSERT_TRUE(s.done);
  std::string text;
  for (const auto& chunk : s.chunks) {
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_TRUE(chunk["id"].get<std::string>().starts_with("cmpl-"));
    text += chunk["choices"][0]["text"].get<std::string>();
  }
  const auto whole = post_json(*client_, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(json(text), whole.body["choices"][0]["text"]);
  EXPECT_TRUE(s.chunks.back().contains("usage"));
}

TEST_F(ApiStreaming, LogprobsStreamedEqualThoseOfTheWholeResponseAndOfAWarmResend) {
  std::string question = "Name a colour.";
  for (int i = 0; i < 8; ++i) question += " Think of the sea, the sky and the fields in spring.";
  json body = chat_request(question, 5, true);  // long enough for the cache's minimum prefix
  body["logprobs"] = true;
  body["top_logprobs"] = 4;
  const auto s = stream(*client_, "/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200);
  ASSERT_TRUE(s.done);
  json streamed = json::array();
  for (const auto& chunk : s.chunks) {
    if (chunk["choices"].empty() || chunk["choices"][0]["logprobs"].is_null()) continue;
    for (const auto& entry : chunk["choices"][0]["logprobs"]["content"]) streamed.push_back(entry);
  }
  ASSERT_EQ(streamed.size(), 5u) << "one entry per generated token";
  for (const auto& entry : streamed) {
    ASSERT_EQ(entry["top_logprobs"].size(), 4u);
    EXPECT_EQ(entry["top_logprobs"][0]["id"], entry["id"]) << "temperature 0 takes the most likely token";
    EXPECT_LE(entry["logprob"].get<double>(), 0.0);
  }
  // The same request again is a cache hit; greedy output and its log-probabilities must not move.
  body["stream"] = false;
  const auto whole = post_json(*client_, "/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  EXPECT_NE(whole.body["prompt_cache"]["outcome"], "cold");
  const json& content = whole.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), streamed.size());
  for (std::size_t i = 0; i < content.size(); ++i) {
    EXPECT_EQ(content[i]["id"], streamed[i]["id"]);
    EXPECT_NEAR(content[i]["logprob"].get<double>(), streamed[i]["logprob"].get<double>(), 1e-3);
  }
}

TEST_F(ApiStreaming, LegacyCompletionLogprobs) {
  const auto whole = post_json(*client_, "/v1/completions",
                               {{"prompt", "Once"}, {"max_tokens", 4}, {"temperature", 0}, {"logprobs", 2}});
  ASSERT_EQ(whole.status, 200) << whole.raw;
  const json& lp = whole.body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 4u);
  ASSERT_EQ(lp["token_logprobs"].size(), 4u);
  ASSERT_EQ(lp["top_logprobs"].size(), 4u);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_LE(lp["top_logprobs"][0].size(), 2u);
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_GE(lp["text_offset"][i].get<int>(), lp["text_offset"][i - 1].get<int>());
  }
}

TEST_F(ApiStreaming, ErrorsBeforeTheStreamStartsAreJson) {
  json body = chat_request("x", 4, true);
  body["temperature"] = 7;
  const auto reply = post_json(*client_, "/v1/chat/completions", body);
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(reply.body["error"]["param"], "temperature");
}

TEST_F(ApiStreaming, ClientDisconnectCancelsTheRequest) {
  // Long enough that, uncancelled, it would run for a while: the context minus the prompt.
  const int max_tokens = 1900;
  int chunks_seen = 0;
  {
    auto client = server_->client();
    auto res = client->Post("/v1/completions", httplib::Headers{},
                            json({{"prompt", "Go"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", true}}).dump(),
                            "application/json", [&](const char*, std::size_t) { return ++chunks_seen < 3; });
    EXPECT_FALSE(res);  // we hung up
  }
  EXPECT_GE(chunks_seen, 3);

  // The server notices, cancels, and frees the slot; it is not stuck generating 1900 tokens.
  const auto t0 = std::chrono::steady_clock::now();
  double running = -1;
  double generated = -1;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    auto metrics = client_->Get("/metrics");
    ASSERT_TRUE(metrics);
    running = metric_value(metrics->body, "prefixd_requests_running");
    generated = metric_value(metrics->body, "prefixd_generated_tokens_total");
    if (running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(running, 0);
  EXPECT_LT(generated, max_tokens) << "the abandoned request ran to completion";

  const auto t1 = std::chrono::steady_clock::now();
  const auto next = post_json(*client_, "/v1/completions", {{"prompt", "Next"}, {"max_tokens", 4}});
  EXPECT_EQ(next.status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(10));
}

TEST_F(ApiStreaming, AbandonedNonStreamingRequestIsCancelled) {
  const int max_tokens = 1900;
  {
    auto impatient = server_->client();
    impatient->set_read_timeout(std::chrono::milliseconds(300));
    // Greedy: a sampled end-of-generation token could end the request before the client gives up.
    const auto reply = post_json(*impatient, "/v1/completions",
                                 {{"prompt", "Wait"}, {"max_tokens", max_tokens}, {"temperature", 0}});
    EXPECT_EQ(reply.status, 0) << "expected the client to time out, got " << reply.raw;
  }
  const auto t0 = std::chrono::steady_clock::now();
  double running = -1;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    auto metrics = client_->Get("/metrics");
    ASSERT_TRUE(metrics);
    running = metric_value(metrics->body, "prefixd_requests_running");
    if (running == 0) {
      EXPECT_LT(metric_value(metrics->body, "prefixd_generated_tokens_total"), max_tokens);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(running, 0);
}

}  // namespace
}  // namespace prefixd::testing
