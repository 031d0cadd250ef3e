// The real `prefixd serve` binary over HTTP: every route, the OpenAI response shapes, token
// accounting, and the status code of every kind of bad input.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

json chat(const std::string& content, int max_tokens = 8, json extra = json::object()) {
  json body = {{"model", "tiny"},
               {"messages", json::array({{{"role", "user"}, {"content", content}}})},
               {"max_tokens", max_tokens},
               {"temperature", 0}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

class ApiRoutes : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>();
    client_ = server_->client();
  }
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ApiRoutes, HealthIsOk) {
  const auto reply = get_json(*client_, "/health");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, json({{"status", "ok"}}));
}

TEST_F(ApiRoutes, ModelsListsTheServedModel) {
  const auto reply = get_json(*client_, "/v1/models");
  ASSERT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(reply.body["object"], "list");
  ASSERT_EQ(reply.body["data"].size(), 1u);
  const json& model = reply.body["data"][0];
  EXPECT_EQ(model["id"], "tiny");
  EXPECT_EQ(model["object"], "model");
  EXPECT_EQ(model["owned_by"], "prefixd");
  EXPECT_GT(model["meta"]["n_ctx_train"].get<int>(), 0);
  EXPECT_GT(model["meta"]["n_params"].get<long long>(), 0);
  EXPECT_TRUE(model["meta"]["architecture"].is_string());
  EXPECT_TRUE(model["meta"]["family"].is_string());

  EXPECT_EQ(get_json(*client_, "/v1/models/tiny").status, 200);
  const auto missing = get_json(*client_, "/v1/models/gpt-4");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body["error"]["code"], "model_not_found");
}

TEST_F(ApiRoutes, ChatCompletionHasTheOpenAiShape) {
  const auto reply = post_json(*client_, "/v1/chat/completions", chat("Hello there", 8));
  ASSERT_EQ(reply.status, 200) << reply.raw;
  const json& body = reply.body;
  EXPECT_TRUE(body["id"].get<std::string>().starts_with("chatcmpl-"));
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_GT(body["created"].get<long long>(), 1'600'000'000);
  EXPECT_EQ(body["model"], "tiny");
  ASSERT_EQ(body["choices"].size(), 1u);
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_TRUE(choice["message"]["content"].is_string());
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_TRUE(choice["finish_reason"] == "stop" || choice["finish_reason"] == "length") << choice;
  const json& usage = body["usage"];
  EXPECT_GT(usage["prompt_tokens"].get<int>(), 0);
  EXPECT_LE(usage["completion_tokens"].get<int>(), 8);
  EXPECT_EQ(usage["total_tokens"], usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
  EXPECT_TRUE(usage["prompt_tokens_details"]["cached_tokens"].is_number_integer());
  for (const char* key : {"outcome", "cached_tokens", "fed_tokens", "tier", "scope"}) {
    EXPECT_TRUE(body["prompt_cache"].contains(key)) << key;
  }
  for (const char* key : {"prompt_ms", "predicted_ms", "prompt_per_second", "predicted_per_second"}) {
    EXPECT_TRUE(body["timings"][key].is_number()) << key;
  }
}

TEST_F(ApiRoutes, CompletionAcceptsTextTokenIdsAndAOneStringArray) {
  for (const json& prompt : {json("Once upon a time"), json::array({"Once upon a time"}), json::array({1, 2, 3, 4})}) {
    const auto reply = post_json(*client_, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}});
    ASSERT_EQ(reply.status, 200) << prompt << " " << reply.raw;
    EXPECT_TRUE(reply.body["id"].get<std::string>().starts_with("cmpl-"));
    EXPECT_EQ(reply.body["object"], "text_completion");
    EXPECT_TRUE(reply.body["choices"][0]["text"].is_string());
    EXPECT_TRUE(reply.body.contains("prompt_cache"));
  }
  // Token ids are used as given: the prompt is exactly as long as the array.
  const auto reply = post_json(*client_, "/v1/completions", {{"prompt", {5, 6, 7, 8, 9, 10}}, {"max_tokens", 1}});
  ASSERT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(reply.body["usage"]["prompt_tokens"], 6);
}

TEST_F(ApiRoutes, PromptTokensAreTheTokenizedPrompt) {
  // Completions: the text tokenized with special tokens (BOS where the model wants one).
  for (const std::string text : {"Hello", "Hello, world. This prompt is a good deal longer than the first one."}) {
    const auto tokens = post_json(*client_, "/tokenize", {{"content", text}, {"add_special", true}});
    ASSERT_EQ(tokens.status, 200) << tokens.raw;
    const auto reply = post_json(*client_, "/v1/completions", {{"prompt", text}, {"max_tokens", 1}});
    ASSERT_EQ(reply.status, 200) << reply.raw;
    EXPECT_EQ(reply.body["usage"]["prompt_tokens"], tokens.body["tokens"].size()) << text;
  }
  // Chat: the rendered template, tokenized; a longer message costs more prompt tokens.
  int previous = 0;
  for (const std::string content : {"Hi", "Hi there, how are you doing today? Tell me a long story."}) {
    const auto rendered = post_json(*client_, "/apply-template", chat(content));
    ASSERT_EQ(rendered.status, 200) << rendered.raw;
    const std::string prompt = rendered.body["prompt"];
    EXPECT_NE(prompt.find(content), std::string::npos) << prompt;
    const auto tokens = post_json(*client_, "/tokenize", {{"content", prompt}, {"add_special", true}});
    const auto reply = post_json(*client_, "/v1/chat/completions", chat(content, 1));
    ASSERT_EQ(reply.status, 200) << reply.raw;
    const int prompt_tokens = reply.body["usage"]["prompt_tokens"];
    EXPECT_EQ(prompt_tokens, static_cast<int>(tokens.body["tokens"].size())) << prompt;
    EXPECT_GT(prompt_tokens, previous);
    previous = prompt_tokens;
  }
}

TEST_F(ApiRoutes, SpecialTokensInTheTemplateAreSingleTokens) {
  const auto tokens = post_json(*client_, "/tokenize", {{"content", "<|im_start|>"}});
  ASSERT_EQ(tokens.status, 200) << tokens.raw;
  EXPECT_EQ(tokens.body["tokens"].size(), 1u) << tokens.raw;
}

TEST_F(ApiRoutes, ToolsAndToolChoiceReachTheTemplate) {
  const json tools = json::array({{{"type", "function"},
                                   {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}});
  const auto with_tools = post_json(*client_, "/apply-template", chat("Weather in Paris?", 8, {{"tools", tools}}));
  ASSERT_EQ(with_tools.status, 200) << with_tools.raw;
  EXPECT_NE(with_tools.body["prompt"].get<std::string>().find("get_weather"), std::string::npos) << with_tools.raw;

  const auto none = post_json(*client_, "/apply-template", chat("Weather in Paris?", 8, {{"tools", tools}, {"tool_choice", "none"}}));
  ASSERT_EQ(none.status, 200) << none.raw;
  EXPECT_EQ(none.body["prompt"].get<std::string>().find("get_weather"), std::string::npos) << none.raw;

  const auto reply = post_json(*client_, "/v1/chat/completions", chat("Weather in Paris?", 4, {{"tools", tools}}));
  EXPECT_EQ(reply.status, 200) << reply.raw;
}

TEST_F(ApiRoutes, LengthFinishMeansMaxTokensWereGenerated) {
  for (int max_tokens : {1, 5, 12}) {
    const auto reply = post_json(*client_, "/v1/completions", {{"prompt", "The"}, {"max_tokens", max_tokens}, {"temperature", 0}});
    ASSERT_EQ(reply.status, 200) << reply.raw;
    const json& usage = reply.body["usage"];
    if (reply.body["choices"][0]["finish_reason"] == "length") {
      EXPECT_EQ(usage["completion_tokens"], max_tokens);
    } else {
      EXPECT_LT(usage["completion_tokens"].get<int>(), max_tokens);
    }
  }
}

TEST_F(ApiRoutes, TemperatureZeroIsDeterministic) {
  const auto a = post_json(*client_, "/v1/chat/completions", chat("Repeat after me", 16));
  const auto b = post_json(*client_, "/v1/chat/completions", chat("Repeat after me", 16));
  ASSERT_EQ(a.status, 200);
  ASSERT_EQ(b.status, 200);
  EXPECT_EQ(a.body["choices"][0]["message"]["content"], b.body["choices"][0]["message"]["content"]);
}

TEST_F(ApiRoutes, StopStringEndsTheTextBeforeIt) {
  const json request = {{"prompt", "Tell me"}, {"max_tokens", 32}, {"temperature", 0}};
  const auto free_run = post_json(*client_, "/v1/completions", request);
  ASSERT_EQ(free_run.status, 200) << free_run.raw;
  const std::string text = free_run.body["choices"][0]["text"];
  // Greedy on the generated tiny model is deterministic: it writes well past 6 bytes here.
  ASSERT_GE(text.size(), 6u) << "the model stopped too early to place a stop string: '" << text << "'";
  const std::string stop = text.substr(text.size() / 2, 2);
  json stopped_request = request;
  stopped_request["stop"] = {stop};
  const auto stopped = post_json(*client_, "/v1/completions", stopped_request);
  ASSERT_EQ(stopped.status, 200) << stopped.raw;
  EXPECT_EQ(stopped.body["choices"][0]["text"], text.substr(0, text.find(stop))) << "stop=" << json(stop);
  EXPECT_EQ(stopped.body["choices"][0]["finish_reason"], "stop");
}

TEST_F(ApiRoutes, MetricsCountRequestsAndTokens) {
  ASSERT_EQ(post_json(*client_, "/v1/completions", {{"prompt", {1, 2, 3}}, {"max_tokens", 3}}).status, 200);
  auto res = client_->Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  for (const std::string name : {"prefixd_requests_total", "prefixd_prompt_tokens_total", "prefixd_prompt_tokens_fed_total",
                                 "prefixd_generated_tokens_total", "prefixd_requests_running", "prefixd_requests_queued"}) {
    EXPECT_NE(res->body.find("# HELP " + name + " "), std::string::npos) << name;
    EXPECT_NE(res->body.find("# TYPE " + name + " "), std::string::npos) << name;
    EXPECT_GE(metric_value(res->body, name), 0) << name;
  }
  EXPECT_GE(metric_value(res->body, "prefixd_requests_total"), 1);
  EXPECT_GE(metric_value(res->body, "prefixd_prompt_tokens_total"), 3);
  EXPECT_GE(metric_value(res->body, "prefixd_generated_tokens_total"), 1);
}

TEST_F(ApiRoutes, UnknownRouteIs404AndWrongMethodIs405) {
  auto unknown = client_->Get("/v1/embeddings/nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_TRUE(json::parse(unknown->body).contains("error"));

  auto get_chat = client_->Get("/v1/chat/completions");
  ASSERT_TRUE(get_chat);
  EXPECT_EQ(get_chat->status, 405);
  EXPECT_TRUE(json::parse(get_chat->body).contains("error"));

  auto post_models = client_->Post("/v1/models", "{}", "application/json");
  ASSERT_TRUE(post_models);
  EXPECT_EQ(post_models->status, 405);
}

TEST_F(ApiRoutes, EveryBadInputGetsItsStatus) {
  const json hello = json::array({{{"role", "user"}, {"content", "hi"}}});
  const std::vector<std::tuple<std::string, std::string, int, std::string>> cases = {
      // path, raw body, status, error.param or error.code expected
      {"/v1/chat/completions", "{\"messages\": [", 400, "invalid_json"},
      {"/v1/chat/completions", "[]", 400, ""},
      {"/v1/chat/completions", json({{"messages", json::array()}}).dump(), 400, "messages"},
      {"/v1/chat/completions", json({{"messages", "hi"}}).dump(), 400, "messages"},
      {"/v1/chat/completions", json({{"messages", hello}, {"model", "gpt-4o"}}).dump(), 404, "model_not_found"},
      {"/v1/chat/completions", json({{"messages", hello}, {"temperature", 2.5}}).dump(), 400, "temperature"},
      {"/v1/chat/completions", json({{"messages", hello}, {"temperature", "warm"}}).dump(), 400, "temperature"},
      {"/v1/chat/completions", json({{"messages", hello}, {"top_p", 0}}).dump(), 400, "top_p"},
      {"/v1/chat/completions", json({{"messages", hello}, {"max_tokens", -1}}).dump(), 400, "max_tokens"},
      {"/v1/chat/completions", json({{"messages", hello}, {"n", 2}}).dump(), 400, "n"},
      {"/v1/chat/completions", json({{"messages", hello}, {"stop", 5}}).dump(), 400, "stop"},
      {"/v1/chat/completions", json({{"messages", hello}, {"stream", "yes"}}).dump(), 400, "stream"},
      {"/v1/completions", json({{"prompt", ""}}).dump(), 400, "prompt"},
      {"/v1/completions", json({{"prompt", 5}}).dump(), 400, "prompt"},
      {"/v1/completions", json({{"prompt", {1, 99999999}}}).dump(), 400, "prompt"},
      {"/v1/completions", json({{"prompt", std::vector<int>(2100, 1)}}).dump(), 400, "context_length_exceeded"},
      {"/v1/completions", json({{"prompt", "x"}, {"model", "other"}}).dump(), 404, "model_not_found"},
  };
  for (const auto& [path, body, status, what] : cases) {
    auto res = client_->Post(path, body, "application/json");
    ASSERT_TRUE(res) << path << " " << body.substr(0, 80);
    EXPECT_EQ(res->status, status) << path << " " << body.substr(0, 80) << " -> " << res->body;
    const json reply = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(reply.contains("error")) << res->body;
    EXPECT_EQ(reply["error"]["type"].is_string(), true);
    EXPECT_TRUE(reply["error"]["message"].is_string());
    if (!what.empty()) {
      EXPECT_TRUE(reply["error"]["param"] == what || reply["error"]["code"] == what) << what << " vs " << res->body;
    }
  }
  // Still serving after all of that.
  EXPECT_EQ(post_json(*client_, "/v1/chat/completions", chat("still alive?", 2)).status, 200);
}

TEST_F(ApiRoutes, DeeplyNestedBodiesAre400AndTheServerLives) {
  // 100,000 nested arrays in 200 KB overflowed the stack of the thread that copied the message
  // (or rendered the tools, or digested the kwargs): one request took the server down.
  const std::string nest = std::string(100'000, '[') + std::string(100'000, ']');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x", "extra": )" + nest + "}]}"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"k": )" + nest + "}}"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", )"
                               R"("function": {"name": "f", "parameters": )" + nest + "}}]}"},
      {"/apply-template", R"({"messages": [{"role": "user", "content": "x", "extra": )" + nest + "}]}"},
      {"/v1/completions", R"({"prompt": "x", "extra": )" + nest + "}"},
      {"/tokenize", R"({"content": "x", "extra": )" + nest + "}"},
  };
  for (const auto& [path, body] : cases) {
    auto res = client_->Post(path, body, "application/json");
    ASSERT_TRUE(res) << path << ": no answer (the server died?)";
    EXPECT_EQ(res->status, 400) << path << " -> " << res->body;
    EXPECT_EQ(json::parse(res->body, nullptr, false)["error"]["code"], "json_too_deep") << res->body;
  }
  EXPECT_TRUE(server_->running());
  EXPECT_EQ(post_json(*client_, "/v1/chat/completions", chat("still alive?", 2)).status, 200);
}

TEST(ApiLimits, BodyLargerThanTheLimitIs413) {
  ServerProcess server({.extra_args = {"--max-body-bytes", "4096"}});
  auto client = server.client();
  const json body = {{"prompt", std::string(8000, 'a')}, {"max_tokens", 1}};
  auto res = client->Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  EXPECT_TRUE(json::parse(res->body, nullptr, false).contains("error")) << res->body;
  EXPECT_EQ(post_json(*client, "/v1/completions", {{"prompt", "ok"}, {"max_tokens", 1}}).status, 200);
}

}  // namespace
}  // namespace prefixd::testing
