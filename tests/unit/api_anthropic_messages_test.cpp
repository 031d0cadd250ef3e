// The Messages API adapter: an Anthropic body becomes the chat request every endpoint builds its
// prompt from; usage, stop reasons and errors come back in Anthropic's words.
#include <gtest/gtest.h>

#include <chrono>

#include <string>

#include "api/anthropic/anthropic_messages.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

ParseOptions options() {
  ParseOptions o;
  o.model_names = {"tiny"};
  return o;
}

MessagesRequest parsed_ok(const json& body, MessagesRoute route = MessagesRoute::create) {
  auto parsed = parse_messages_request(body.dump(), options(), route);
  EXPECT_TRUE(parsed.has_value()) << (parsed ? "" : parsed.error().message);
  return parsed.value_or(MessagesRequest{});
}

ApiError parsed_error(const json& body) {
  auto parsed = parse_messages_request(body.dump(), options(), MessagesRoute::create);
  EXPECT_FALSE(parsed.has_value()) << body.dump();
  return parsed ? ApiError{} : parsed.error();
}

json body(json messages, json extra = json::object()) {
  json out = {{"model", "tiny"}, {"max_tokens", 16}, {"messages", std::move(messages)}};
  for (auto& [key, value] : extra.items()) out[key] = value;
  return out;
}

TEST(AnthropicMessages, AnAgentTurnBecomesTheTemplatesConversation) {
  const json messages = json::parse(R"([
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "I should look it up.", "signature": "x"},
      {"type": "text", "text": "Let me check."},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"days": 3, "city": "Oslo"}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "rain"}]},
      {"type": "tool_result", "tool_use_id": "toolu_2", "content": "down", "is_error": true},
      {"type": "text", "text": "And tomorrow?"}]}])");
  const json tools = json::parse(R"([{"name": "get_weather", "description": "Weather",
      "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}])");
  // nlohmann::json sorts keys; the client's text sends "days" first.
  std::string text = body(messages, {{"system", "Be brief."}, {"tools", tools}}).dump();
  const std::string sorted = R"({"city":"Oslo","days":3})";
  text.replace(text.find(sorted), sorted.size(), R"({"days":3,"city":"Oslo"})");
  auto parsed = parse_messages_request(text, options(), MessagesRoute::create);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  const MessagesRequest& r = *parsed;
  const json& m = r.chat.chat.messages;
  ASSERT_EQ(m.size(), 6u) << m.dump();
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(m[1], json({{"role", "user"}, {"content", "Weather in Oslo?"}}));
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "Let me check.");
  EXPECT_EQ(m[2]["reasoning_content"], "I should look it up.");
  // The input as sent, compact, keys in their order: the form a reply's call is cached in.
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], R"({"days":3,"city":"Oslo"})");
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(m[3], json({{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "rain"}}));
  EXPECT_EQ(m[4], json({{"role", "tool"}, {"tool_call_id", "toolu_2"}, {"content", "Error: down"}}));
  EXPECT_EQ(m[5], json({{"role", "user"}, {"content", "And tomorrow?"}}));
  EXPECT_EQ(r.chat.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.chat.tools[0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(r.chat.tool_choice, "auto");
  EXPECT_EQ(r.chat.params.max_tokens, 16);
  EXPECT_FALSE(r.breakpoint_messages.has_value());
}

TEST(AnthropicMessages, ToolChoiceSamplingStopAndSessionMapOntoTheChatRequest) {
  const json tools = json::parse(R"([{"name": "f", "input_schema": {"type": "object"}}])");
  const json user = json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(parsed_ok(body(user, {{"tools", tools}, {"tool_choice", {{"type", "any"}}}})).chat.tool_choice, "required");
  EXPECT_EQ(parsed_ok(body(user, {{"tools", tools}, {"tool_choice", {{"type", "none"}}}})).chat.tool_choice, "none");
  const MessagesRequest named = parsed_ok(body(
      user, {{"tools", tools}, {"tool_choice", {{"type", "tool"}, {"name", "f"}, {"disable_parallel_tool_use", true}}}}));
  EXPECT_EQ(named.chat.tool_choice["function"]["name"], "f");
  EXPECT_FALSE(named.chat.parallel_tool_calls);
  EXPECT_TRUE(named.chat.tools.is_array());  // a forced call's grammar reads the schema in order
  const MessagesRequest r = parsed_ok(body(user, {{"temperature", 0}, {"top_k", 40}, {"top_p", 0.5},
                                                  {"stop_sequences", {"END", "STOP"}},
                                                  {"metadata", {{"user_id", "u-1"}}}, {"thinking", {{"type", "disabled"}}}}));
  EXPECT_EQ(r.chat.params.sampling.top_k, 1);  // temperature 0 is greedy
  EXPECT_FLOAT_EQ(r.chat.params.sampling.top_p, 0.5f);
  EXPECT_EQ(r.chat.params.stop, (std::vector<std::string>{"END", "STOP"}));
  EXPECT_EQ(r.chat.params.cache.session_key, "u-1");
  EXPECT_EQ(r.chat.chat.extra_context, json({{"enable_thinking", false}}));
  // count_tokens needs no max_tokens.
  json counted = body(user);
  counted.erase("max_tokens");
  parsed_ok(counted, MessagesRoute::count_tokens);
}

TEST(AnthropicMessages, TheLastBreakpointSaysHowManyMessagesItCovers) {
  const json system = json::parse(R"([{"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral"}}])");
  const json one = json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(parsed_ok(body(one, {{"system", system}})).breakpoint_messages, 1u);
  const json marked = json::parse(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
      {"role": "user", "content": [{"type": "text", "text": "c", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
      {"role": "assistant", "content": "d"}, {"role": "user", "content": "e"}])");
  EXPECT_EQ(parsed_ok(body(marked, {{"system", system}})).breakpoint_messages, 4u);
  const json tools = json::parse(R"([{"name": "f", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}])");
  EXPECT_EQ(parsed_ok(body(one, {{"tools", tools}})).breakpoint_messages, 0u);
}

// What an agent CLI (Claude Code) sends besides the basics: its environment as a system message
// inside the conversation, adaptive thinking, and deferred tools it loads later by search.
TEST(AnthropicMessages, SystemTurnsAdaptiveThinkingAndDeferredToolsAsAnAgentSendsThem) {
  const json messages = json::parse(R"([
      {"role": "user", "content": [{"type": "text", "text": "Say hi"}]},
      {"role": "system", "content": [{"type": "text", "text": "# Environment\ncwd: /work", "cache_control": {"type": "ephemeral"}}]}])");
  const json tools = json::parse(R"([
      {"name": "Read", "description": "Reads a file.", "input_schema": {"type": "object"}},
      {"name": "Later", "description": "Found by search.", "input_schema": {"type": "object"}, "defer_loading": true}])");
  const MessagesRequest r = parsed_ok(body(messages, {{"system", "You are an agent."}, {"tools", tools},
                                                      {"thinking", {{"type", "adaptive"}, {"display", "omitted"}}}}));
  const json& m = r.chat.chat.messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1], json({{"role", "user"}, {"content", "Say hi"}}));
  EXPECT_EQ(m[2], json({{"role", "system"}, {"content", "# Environment\ncwd: /work"}}));
  EXPECT_EQ(r.breakpoint_messages, 3u) << "the system turn's breakpoint";
  EXPECT_EQ(r.chat.chat.extra_context, json({{"enable_thinking", true}}));
  ASSERT_EQ(r.chat.tools.size(), 1u) << "a deferred tool is not shown to the model";
  EXPECT_EQ(r.chat.tools[0]["function"]["name"], "Read");
}

TEST(AnthropicMessages, EachTtlRetainsThePrefixUpToItsLastBreakpoint) {
  using namespace std::chrono_literals;
  const json system = json::parse(R"([{"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}])");
  const json tools = json::parse(R"([{"name": "f", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}])");
  const json marked = json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]},
      {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}])");
  const MessagesRequest r = parsed_ok(body(marked, {{"system", system}, {"tools", tools}}));
  ASSERT_EQ(r.retained.size(), 2u);
  // The last 5-minute breakpoint is the first user message's (the tools' one lies before it); the
  // hour is the system prompt's.
  EXPECT_EQ(r.retained[0].messages, 2u);
  EXPECT_EQ(r.retained[0].ttl, 5min);
  EXPECT_EQ(r.retained[1].messages, 1u);
  EXPECT_EQ(r.retained[1].ttl, 1h);
  // A tools breakpoint retains the system prompt the template renders them into; without a system
  // prompt no prefix holds the tools alone.
  const json one = json::array({{{"role", "user"}, {"content", "hi"}}});
  const json plain_system = json::array({{{"type", "text"}, {"text", "Rules."}}});
  const MessagesRequest with_system = parsed_ok(body(one, {{"system", plain_system}, {"tools", tools}}));
  ASSERT_EQ(with_system.retained.size(), 1u);
  EXPECT_EQ(with_system.retained[0].messages, 1u);
  EXPECT_TRUE(parsed_ok(body(one, {{"tools", tools}})).retained.empty());
  EXPECT_TRUE(parsed_ok(body(one)).retained.empty());
}

TEST(AnthropicMessages, WhatCannotBeServedIsA400NamingTheField) {
  const json user = json::array({{{"role", "user"}, {"content", "hi"}}});
  json no_max = body(user);
  no_max.erase("max_tokens");
  EXPECT_EQ(parsed_error(no_max).param, "max_tokens");
  json no_model = body(user);
  no_model.erase("model");
  EXPECT_EQ(parsed_error(no_model).param, "model");
  EXPECT_EQ(parsed_error(body(user, {{"model", "claude-x"}})).status, 404);
  EXPECT_EQ(parsed_error(body(json::array({{{"role", "user"}, {"content", json::array({{{"type", "image"}, {"source", json::object()}}})}}})))
                .param,
            "messages[0].content[0]");  // an image, and this parser has no projector
  EXPECT_EQ(parsed_error(body(json::array({{{"role", "tool"}, {"content", "x"}}}))).param, "messages[0].role");
  EXPECT_EQ(parsed_error(body(json::array({{{"role", "user"}, {"content", "x"}}}), {{"thinking", {{"type", "sometimes"}}}})).param,
            "thinking.type");
  EXPECT_EQ(parsed_error(body(json::array({{{"role", "user"}, {"content", "x"}}}), {{"thinking", {{"type", "adaptive"}, {"display", "all"}}}}))
                .param,
            "thinking.display");
  EXPECT_EQ(parsed_error(body(json::array({{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", "pre"}}})))
                .param,
            "messages[1]");
  EXPECT_EQ(parsed_error(body(user, {{"tools", json::parse(R"([{"type": "web_search_20250305", "name": "web_search"}])")}})).param,
            "tools[0].type");
  EXPECT_EQ(parsed_error(body(user, {{"temperature", 1.5}})).param, "temperature");
  EXPECT_EQ(parsed_error(body(user, {{"tool_choice", {{"type", "any"}}}})).param, "tool_choice");
  const json late_result = json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "x"},
      {"type": "tool_result", "tool_use_id": "t", "content": "y"}]}])");
  EXPECT_EQ(parsed_error(body(late_result)).param, "messages[0].content[1]");
  EXPECT_EQ(parsed_error(body(json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "x",
      "cache_control": {"type": "ephemeral", "ttl": "2h"}}]}])"))).param,
            "messages[0].content[0].cache_control.ttl");
}

TEST(AnthropicMessages, UsageSplitsThePromptIntoReadCreatedAndInput) {
  const scheduler::Usage usage{.prompt_tokens = 100, .completion_tokens = 7, .cached_tokens = 30};
  const MessagesUsage none = messages_usage(usage, std::nullopt);
  EXPECT_EQ(none.cache_read_input_tokens, 30);
  EXPECT_EQ(none.cache_creation_input_tokens, 0);
  EXPECT_EQ(none.input_tokens, 70);
  EXPECT_EQ(none.output_tokens, 7);
  const MessagesUsage at80 = messages_usage(usage, 80);
  EXPECT_EQ(at80.cache_creation_input_tokens, 50);
  EXPECT_EQ(at80.input_tokens, 20);
  const MessagesUsage before_cached = messages_usage(usage, 10);  // the breakpoint's prefix was read
  EXPECT_EQ(before_cached.cache_creation_input_tokens, 0);
  EXPECT_EQ(before_cached.input_tokens, 70);
}

TEST(AnthropicMessages, ErrorsAndStopReasonsUseAnthropicsWords) {
  EXPECT_EQ(anthropic_error_json(invalid_param("x", "bad")),
            nlohmann::ordered_json::parse(R"({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})"));
  EXPECT_EQ(anthropic_error_json(unauthorized())["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_json(model_not_found("m"))["error"]["type"], "not_found_error");
  EXPECT_EQ(anthropic_error_json(server_busy("full"))["error"]["type"], "overloaded_error");
  EXPECT_EQ(anthropic_error_json(internal_error("x"))["error"]["type"], "api_error");
  scheduler::StreamEvent done{.kind = scheduler::StreamEvent::Kind::done};
  EXPECT_STREQ(messages_stop_reason(done, false), "end_turn");
  EXPECT_STREQ(messages_stop_reason(done, true), "tool_use");
  done.stop_sequence = "END";
  EXPECT_STREQ(messages_stop_reason(done, false), "stop_sequence");
  done.finish = scheduler::FinishReason::length;
  EXPECT_STREQ(messages_stop_reason(done, false), "max_tokens");
}

TEST(AnthropicMessages, CacheFieldsAreReadAsEveryEndpointReadsThem) {
  const json user = json::array({{{"role", "user"}, {"content", "Hi"}}});
  // metadata.user_id is the session unless prompt_cache_key names one; the salt is kept.
  const MessagesRequest salted =
      parsed_ok(body(user, {{"metadata", {{"user_id", "u-1"}}}, {"cache_salt", "team-a"}}));
  EXPECT_EQ(salted.chat.params.cache.session_key, "u-1");
  ASSERT_TRUE(salted.chat.params.cache.salt.has_value());
  EXPECT_EQ(*salted.chat.params.cache.salt, "team-a");
  EXPECT_TRUE(salted.chat.params.cache.enabled);
  const MessagesRequest keyed = parsed_ok(
      body(user, {{"metadata", {{"user_id", "u-1"}}}, {"extra_body", {{"prompt_cache_key", "k"}, {"cache_prompt", false}}}}));
  EXPECT_EQ(keyed.chat.params.cache.session_key, "k");
  EXPECT_FALSE(keyed.chat.params.cache.enabled);
  EXPECT_FALSE(keyed.chat.params.cache.salt.has_value());
  // An empty salt would silently share: a 400 naming the field.
  const ApiError empty = parsed_error(body(user, {{"cache_salt", ""}}));
  EXPECT_EQ(empty.status, 400);
  EXPECT_EQ(empty.param, "cache_salt");
}

}  // namespace
}  // namespace prefixd::api
