// HttpServer in-process over the FakeEngine and the real Scheduler: routes, status codes and
// bodies, without the CLI or a model file (tests/integration/ covers the real binary).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api/prompt/chat_template.h"
#include "api/server.h"
#include "support/fake_engine.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

class InProcessServer {
 public:
  explicit InProcessServer(ServerOptions options = {}, scheduler::SchedulerOptions sched = {.n_slots = 2, .max_queued = 8})
      : engine_(engine::FakeEngineOptions{.n_ctx = 1024, .n_batch = 64, .n_seq = 4}),
        scheduler_(engine_, sched),
        server_(engine_, scheduler_, with_port_zero(std::move(options))),
        thread_([this] { server_.run(); }) {
    for (int i = 0; i < 500 && server_.bound_port() <= 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_.bound_port());
    client_->set_read_timeout(std::chrono::seconds(30));
    for (int i = 0; i < 500 && !client_->Get("/health"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~InProcessServer() {
    server_.stop();
    thread_.join();
  }

  httplib::Client& client() { return *client_; }
  const engine::FakeEngine& engine() const { return engine_; }

 private:
  static ServerOptions with_port_zero(ServerOptions options) {
    options.http.host = "127.0.0.1";
    options.http.port = 0;
    return options;
  }

  engine::FakeEngine engine_;
  scheduler::Scheduler scheduler_;
  HttpServer server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

json post_json(httplib::Client& client, const std::string& path, const json& body, int expected_status) {
  auto res = client.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(res) << path;
  if (!res) return {};
  EXPECT_EQ(res->status, expected_status) << res->body;
  return json::parse(res->body, nullptr, false);
}

const json kHello = json::array({{{"role", "user"}, {"content", "Hello"}}});

TEST(ApiHttpServer, HealthModelsAndMetrics) {
  InProcessServer server;
  auto health = server.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(json::parse(health->body), json({{"status", "ok"}}));

  auto models = server.client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "fake");

  auto metrics = server.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("# TYPE prefixd_requests_total counter"), std::string::npos);
}

TEST(ApiHttpServer, ChatPromptTokensAreTheRenderedTemplate) {
  InProcessServer server;
  const json body = post_json(server.client(), "/v1/chat/completions",
                              {{"messages", kHello}, {"max_tokens", 3}, {"temperature", 0}}, 200);
  // The fake vocabulary has one token per byte, so the prompt is exactly the ChatML rendering.
  const std::string rendered = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(body["usage"]["prompt_tokens"], rendered.size());
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(body.contains("prompt_cache"));
  EXPECT_TRUE(body.contains("timings"));
}

TEST(ApiHttpServer, StreamedChatEndsWithDone) {
  InProcessServer server;
  std::string sse;
  auto res = server.client().Post(
      "/v1/chat/completions", json({{"messages", kHello}, {"max_tokens", 4}, {"stream", true}}).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_TRUE(res->body.starts_with("data: {")) << res->body;
  EXPECT_TRUE(res->body.ends_with("data: [DONE]\n\n")) << res->body;
  EXPECT_NE(res->body.find("\"finish_reason\":\"length\""), std::string::npos) << res->body;
}

TEST(ApiHttpServer, ErrorsHaveStatusAndOpenAiShape) {
  InProcessServer server({.http = {.max_body_bytes = 4096}});
  auto& client = server.client();
  EXPECT_EQ(post_json(client, "/v1/chat/completions", {{"messages", json::array()}}, 400)["error"]["param"], "messages");
  EXPECT_EQ(post_json(client, "/v1/chat/completions", {{"messages", kHello}, {"model", "nope"}}, 404)["error"]["code"],
            "model_not_found");
  EXPECT_EQ(post_json(client, "/v1/completions", {{"prompt", "x"}, {"temperature", 3}}, 400)["error"]["param"], "temperature");

  auto malformed = client.Post("/v1/chat/completions", "{not json", "application/json");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->status, 400);
  EXPECT_TRUE(json::parse(malformed->body).contains("error"));

  auto too_large = client.Post("/v1/chat/completions", std::string(8192, ' '), "application/json");
  ASSERT_TRUE(too_large);
  EXPECT_EQ(too_large->status, 413);
  EXPECT_TRUE(json::parse(too_large->body).contains("error"));

  auto unknown = client.Get("/v2/nothing");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(json::parse(unknown->body)["error"]["code"], "not_found");

  auto wrong_method = client.Get("/v1/chat/completions");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->get_header_value("Allow"), "POST");
  EXPECT_TRUE(json::parse(wrong_method->body).contains("error"));

  const std::string long_prompt(2000, 'x');  // more bytes (= tokens) than the 1024-cell context
  EXPECT_EQ(post_json(client, "/v1/completions", {{"prompt", long_prompt}}, 400)["error"]["code"], "context_length_exceeded");
}

TEST(ApiHttpServer, BearerAuthGuardsEverythingButHealth) {
  InProcessServer server({.api_key = "sekret"});
  auto& client = server.client();
  auto open = client.Get("/health");
  ASSERT_TRUE(open);
  EXPECT_EQ(open->status, 200);

  auto missing = client.Get("/v1/models");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(json::parse(missing->body)["error"]["code"], "invalid_api_key");

  auto wrong = client.Get("/v1/models", {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);

  auto right = client.Get("/v1/models", {{"Authorization", "Bearer sekret"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
}

TEST(ApiHttpServer, NoCachePromptMakesEveryRequestBypass) {
  InProcessServer server({.cache_prompt_default = false});
  const json body = post_json(server.client(), "/v1/completions", {{"prompt", "abc"}, {"max_tokens", 2}}, 200);
  EXPECT_EQ(body["prompt_cache"]["outcome"], "bypass");
}

TEST(ApiHttpServer, StopIsNeverLostDuringStartup) {
  engine::FakeEngine engine;
  scheduler::Scheduler scheduler(engine, {});
  {
    HttpServer server(engine, scheduler, {.http = {.host = "127.0.0.1", .port = 0}});
    server.stop();  // before run(): run() must not block
    EXPECT_TRUE(server.run());
  }
  for (int i = 0; i < 20; ++i) {  // stop() racing with run()'s startup
    HttpServer server(engine, scheduler, {.http = {.host = "127.0.0.1", .port = 0}});
    std::thread runner([&] { server.run(); });
    server.stop();
    runner.join();
  }
}

TEST(ApiHttpServer, MetricsCanBeTurnedOff) {
  InProcessServer server({.metrics = false});
  auto res = server.client().Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

}  // namespace
}  // namespace prefixd::api
