// POST /v1/messages end to end on the tiny generated model: Anthropic's bodies, events, usage and
// errors; one conversation sent through Chat Completions and continued as Messages reuses its
// cache entries; an agent's tool loop through Messages feeds only the tool results.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

const std::string kSystem = "You are a weather agent. Answer every question about the weather briefly and call a tool.";

json tools() {
  return json::parse(R"([{"name": "get_weather", "description": "Weather for a city", "input_schema": {
      "type": "object", "properties": {"city": {"type": "string", "enum": ["Oslo", "Rome", "Lima"]},
                                       "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "days"], "additionalProperties": false}}])");
}

// The same tools as Chat Completions declares them.
json chat_tools() {
  json out = json::array();
  for (const json& t : tools()) {
    out.push_back({{"type", "function"},
                   {"function", {{"name", t["name"]}, {"description", t["description"]}, {"parameters", t["input_schema"]}}}});
  }
  return out;
}

JsonReply messages(httplib::Client& client, json body) {
  if (!body.contains("model")) body["model"] = "tiny";
  return post_json(client, "/v1/messages", body);
}

int total_input(const json& usage) {
  return usage["input_tokens"].get<int>() + usage["cache_read_input_tokens"].get<int>() +
         usage["cache_creation_input_tokens"].get<int>();
}

TEST(AnthropicMessages, ARepliesBodyAndItsStreamAgreeAndUsageAddsUpToThePrompt) {
  ServerProcess server;
  auto client = server.client();
  const json request = {{"max_tokens", 12}, {"temperature", 0}, {"system", kSystem},
                        {"messages", json::array({{{"role", "user"}, {"content", "Is it raining in Oslo?"}}})}};
  const auto whole = messages(*client, request);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  const json& body = whole.body;
  EXPECT_TRUE(body["id"].get<std::string>().starts_with("msg_"));
  EXPECT_EQ(body["type"], "message");
  EXPECT_EQ(body["role"], "assistant");
  EXPECT_EQ(body["model"], "tiny");
  ASSERT_EQ(body["content"].size(), 1u) << whole.raw;
  EXPECT_EQ(body["content"][0]["type"], "text");
  EXPECT_TRUE(body["stop_reason"] == "end_turn" || body["stop_reason"] == "max_tokens") << whole.raw;
  // count_tokens says what the prompt is; usage splits exactly that many tokens.
  json count_request = request;
  count_request.erase("max_tokens");
  count_request["model"] = "tiny";
  const auto counted = post_json(*client, "/v1/messages/count_tokens", count_request);
  ASSERT_EQ(counted.status, 200) << counted.raw;
  const int prompt = counted.body["input_tokens"].get<int>();
  EXPECT_EQ(total_input(body["usage"]), prompt);
  EXPECT_EQ(body["usage"]["cache_read_input_tokens"], body["prompt_cache"]["cached_tokens"]);
  EXPECT_EQ(body["usage"]["input_tokens"], body["prompt_cache"]["fed_tokens"]);  // no breakpoint: nothing "created"

  json streamed_request = request;
  streamed_request["stream"] = true;
  streamed_request["model"] = "tiny";
  auto streamed = client->Post("/v1/messages", streamed_request.dump(), "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200);
  const auto events = sse_events(streamed->body);
  std::vector<std::string> names;
  std::string text;
  json final_usage;
  for (const auto& [name, data] : events) {
    EXPECT_EQ(data["type"], name);
    if (names.empty() || names.back() != name) names.push_back(name);
    if (name == "content_block_delta") text += data["delta"]["text"].get<std::string>();
    if (name == "message_delta") final_usage = data["usage"];
  }
  EXPECT_EQ(names, (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                             "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(text, body["content"][0]["text"].get<std::string>());
  EXPECT_EQ(total_input(final_usage), prompt);
  EXPECT_EQ(final_usage["output_tokens"], body["usage"]["output_tokens"]);
}

TEST(AnthropicMessages, AChatCompletionContinuedAsAMessageReusesItsPrefix) {
  ServerProcess server;
  auto client = server.client();
  const json question = {{"role", "user"}, {"content", "What will the weather be like in Rome and Lima this week?"}};
  const auto first = post_json(*client, "/v1/chat/completions",
                               {{"messages", json::array({{{"role", "system"}, {"content", kSystem}}, question})},
                                {"max_tokens", 6}, {"temperature", 0}, {"user", "ann"}});
  ASSERT_EQ(first.status, 200) << first.raw;
  const std::string answer = first.body["choices"][0]["message"]["content"];
  const int first_prompt = first.body["usage"]["prompt_tokens"].get<int>();
  const auto next = messages(*client, {{"max_tokens", 4}, {"temperature", 0}, {"system", kSystem},
                                       {"metadata", {{"user_id", "ann"}}},
                                       {"messages", json::array({question, {{"role", "assistant"}, {"content", answer}},
                                                                 {{"role", "user"}, {"content", "And tomorrow?"}}})}});
  ASSERT_EQ(next.status, 200) << next.raw;
  // Everything the first request's prompt held is read from the cache.
  EXPECT_GE(next.body["usage"]["cache_read_input_tokens"].get<int>(), first_prompt - 1) << next.raw;
  EXPECT_EQ(next.body["usage"]["cache_read_input_tokens"], next.body["prompt_cache"]["cached_tokens"]);
}

TEST(AnthropicMessages, ABreakpointCountsWhatWasCachedUpToIt) {
  ServerProcess server;
  auto client = server.client();
  const json system = json::array({{{"type", "text"}, {"text", kSystem}, {"cache_control", {{"type", "ephemeral"}}}}});
  const json request = {{"max_tokens", 2}, {"temperature", 0}, {"system", system},
                        {"messages", json::array({{{"role", "user"}, {"content", "Oslo?"}}})}};
  const auto cold = messages(*client, request);
  ASSERT_EQ(cold.status, 200) << cold.raw;
  const json& usage = cold.body["usage"];
  EXPECT_EQ(usage["cache_read_input_tokens"], 0);
  // The system prompt rendered alone, as the template writes it before the first user turn.
  const auto system_tokens = post_json(*client, "/tokenize", {{"messages", json::array({{{"role", "system"}, {"content", kSystem}}})},
                                                               {"add_generation_prompt", false}});
  ASSERT_EQ(system_tokens.status, 200) << system_tokens.raw;
  EXPECT_EQ(usage["cache_creation_input_tokens"], system_tokens.body["tokens"].size()) << cold.raw;
  EXPECT_GT(usage["input_tokens"].get<int>(), 0);
  // The same request again: the prompt is read back, nothing is created.
  const auto warm = messages(*client, request);
  EXPECT_EQ(warm.body["usage"]["cache_creation_input_tokens"], 0) << warm.raw;
  EXPECT_EQ(warm.body["usage"]["cache_read_input_tokens"].get<int>(), total_input(usage) - 1) << warm.raw;
  EXPECT_EQ(warm.body["usage"]["input_tokens"], 1);
}

TEST(AnthropicMessages, AnAgentLoopThroughMessagesFeedsOnlyTheToolResults) {
  ServerProcess server({.ctx_size = 4096});
  auto client = server.client();
  json history = json::array({{{"role", "user"}, {"content", "Weather in Oslo for three days?"}}});
  for (int turn = 0; turn < 3; ++turn) {
    const auto reply = messages(*client, {{"max_tokens", 120}, {"system", kSystem}, {"tools", tools()},
                                          {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}},
                                          {"metadata", {{"user_id", "agent"}}}, {"messages", history}});
    ASSERT_EQ(reply.status, 200) << reply.raw;
    ASSERT_EQ(reply.body["stop_reason"], "tool_use") << reply.raw;
    const json& content = reply.body["content"];
    const auto call = std::ranges::find_if(content, [](const json& block) { return block["type"] == "tool_use"; });
    ASSERT_NE(call, content.end()) << reply.raw;
    EXPECT_EQ((*call)["name"], "get_weather");
    EXPECT_TRUE((*call)["input"]["city"].is_string());
    if (turn > 0) {
      // The previous turn's prompt and its call were cached: the tool result and the
      // scaffolding around it are all that was computed.
      const int fed = reply.body["prompt_cache"]["fed_tokens"].get<int>();
      EXPECT_LT(fed, 40) << "turn " << turn << ": " << reply.raw;
      EXPECT_EQ(reply.body["usage"]["input_tokens"], fed);
    }
    history.push_back({{"role", "assistant"}, {"content", content}});
    history.push_back({{"role", "user"},
                       {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", (*call)["id"]}, {"content", "rain, 9 C"}}})}});
  }
  // The same loop as Chat Completions renders it is the same prompt: the Messages turn is a hit.
  const auto tokens = post_json(*client, "/tokenize", {{"messages", json::array({{{"role", "system"}, {"content", kSystem}},
                                                                                  {{"role", "user"}, {"content", "Weather in Oslo for three days?"}}})},
                                                        {"tools", chat_tools()}});
  ASSERT_EQ(tokens.status, 200) << tokens.raw;
  const auto counted = post_json(*client, "/v1/messages/count_tokens",
                                 {{"model", "tiny"}, {"system", kSystem}, {"tools", tools()},
                                  {"messages", json::array({{{"role", "user"}, {"content", "Weather in Oslo for three days?"}}})}});
  EXPECT_EQ(counted.body["input_tokens"], tokens.body["tokens"].size());
}

TEST(AnthropicMessages, ErrorsHaveAnthropicsShapeAndXApiKeyAuthenticates) {
  ServerProcess server({.extra_args = {"--api-key", "sk-test"}});
  httplib::Client client("127.0.0.1", server.port());
  const json ok = {{"model", "tiny"}, {"max_tokens", 2}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  auto no_key = client.Post("/v1/messages", ok.dump(), "application/json");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  EXPECT_EQ(json::parse(no_key->body), json::parse(R"({"type":"error","error":{"type":"authentication_error","message":)" +
                                                   json(json::parse(no_key->body)["error"]["message"]).dump() + "}}"));
  httplib::Headers headers = {{"x-api-key", "sk-test"}, {"anthropic-version", "2023-06-01"}};
  auto served = client.Post("/v1/messages", headers, ok.dump(), "application/json");
  ASSERT_TRUE(served);
  EXPECT_EQ(served->status, 200) << served->body;
  auto refused = [&](json body, int status, const std::string& type) {
    auto res = client.Post("/v1/messages", headers, body.dump(), "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << res->body;
    const json error = json::parse(res->body, nullptr, false);
    EXPECT_EQ(error["type"], "error") << res->body;
    EXPECT_EQ(error["error"]["type"], type) << res->body;
    EXPECT_TRUE(error["error"]["message"].is_string()) << res->body;
  };
  json no_max = ok;
  no_max.erase("max_tokens");
  refused(no_max, 400, "invalid_request_error");
  json other_model = ok;
  other_model["model"] = "claude-opus";
  refused(other_model, 404, "not_found_error");
  json image = ok;
  image["messages"][0]["content"] = json::array({{{"type", "image"}, {"source", {{"type", "base64"}}}}});
  refused(image, 400, "invalid_request_error");
  auto not_json = client.Post("/v1/messages", headers, "{", "application/json");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  EXPECT_EQ(json::parse(not_json->body)["type"], "error");
  auto wrong_method = client.Get("/v1/messages", headers);
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(json::parse(wrong_method->body)["error"]["type"], "invalid_request_error");
}

}  // namespace
}  // namespace prefixd::testing
