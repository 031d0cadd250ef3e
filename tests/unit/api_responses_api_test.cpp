// The Responses API adapter: input items become the chat conversation; replies become output
// items; stored responses stay within their tenant, their memory and their age.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "api/responses/response_store.h"
#include "api/responses/responses_api.h"

namespace prefixd::api {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

ParseOptions options() {
  ParseOptions o;
  o.model_names = {"tiny"};
  return o;
}

ResponsesRequest parsed_ok(const std::string& body) {
  auto parsed = parse_responses_request(body, options());
  EXPECT_TRUE(parsed.has_value()) << (parsed ? "" : parsed.error().message);
  return parsed.value_or(ResponsesRequest{});
}

ApiError parsed_error(const json& body) {
  auto parsed = parse_responses_request(body.dump(), options());
  EXPECT_FALSE(parsed.has_value()) << body.dump();
  return parsed ? ApiError{} : parsed.error();
}

TEST(ResponsesApi, InputItemsBecomeTheTemplatesConversation) {
  const ResponsesRequest r = parsed_ok(R"({"model": "tiny", "instructions": "Be brief.", "input": [
      {"role": "developer", "content": "Use metric units."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Oslo?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": []},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
      {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{\"city\": \"Rome\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "rain"}],
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    "max_output_tokens": 50, "temperature": 0, "prompt_cache_key": "s-1", "store": false, "previous_response_id": "resp_x"})");
  const json& m = r.chat.chat.messages;
  ASSERT_EQ(m.size(), 4u) << m.dump();
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "Use metric units."}}));
  EXPECT_EQ(m[1], json({{"role", "user"}, {"content", "Oslo?"}}));
  EXPECT_EQ(m[2]["content"], "Checking.");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);  // the text and both calls are one assistant turn
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Oslo\"}");  // as the model wrote it
  EXPECT_EQ(m[3], json({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "rain"}}));
  EXPECT_EQ(r.instructions, "Be brief.");
  EXPECT_EQ(r.previous_response_id, "resp_x");
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.chat.params.max_tokens, 50);
  EXPECT_EQ(r.chat.params.cache.session_key, "s-1");
  EXPECT_EQ(r.chat.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.chat.tool_choice, "auto");
  // Instructions first, then the stored history, then the input.
  const json history = json::array({{{"role", "user"}, {"content", "earlier"}}});
  const json conversation = conversation_of(r, history);
  ASSERT_EQ(conversation.size(), 6u);
  EXPECT_EQ(conversation[0]["content"], "Be brief.");
  EXPECT_EQ(conversation[1]["content"], "earlier");
  EXPECT_EQ(parsed_ok(R"({"input": "hi"})").chat.chat.messages.dump(), R"([{"role":"user","content":"hi"}])");
}

TEST(ResponsesApi, FormatsAndToolChoiceMapOntoTheChatRequest) {
  const ResponsesRequest schema = parsed_ok(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "w",
      "schema": {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}}}})");
  EXPECT_EQ(schema.chat.response_format.kind, OutputFormat::Kind::json_schema);
  EXPECT_EQ(schema.chat.response_format.schema["properties"].begin().key(), "b");  // the order sent
  EXPECT_EQ(schema.text_format["name"], "w");
  const ResponsesRequest forced = parsed_ok(R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
      "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false})");
  EXPECT_EQ(forced.chat.tool_choice["function"]["name"], "f");
  EXPECT_FALSE(forced.chat.parallel_tool_calls);
  EXPECT_TRUE(forced.chat.tools.is_array());
}

TEST(ResponsesApi, WhatCannotBeServedIsA400NamingTheField) {
  EXPECT_EQ(parsed_error({{"model", "tiny"}}).param, "input");
  EXPECT_EQ(parsed_error({{"input", "x"}, {"model", "gpt-5"}}).status, 404);
  EXPECT_EQ(parsed_error({{"input", "x"}, {"tools", json::array({{{"type", "web_search"}}})}}).param, "tools[0].type");
  // Without a projector an image part is refused as a whole; a file part is refused by its type.
  EXPECT_EQ(parsed_error({{"input", json::array({{{"role", "user"}, {"content", json::array({{{"type", "input_image"}, {"image_url", "x"}}})}}})}})
                .param,
            "input[0].content[0]");
  EXPECT_EQ(parsed_error({{"input", json::array({{{"role", "user"}, {"content", json::array({{{"type", "input_file"}, {"file_id", "x"}}})}}})}})
                .param,
            "input[0].content[0].type");
  EXPECT_EQ(parsed_error({{"input", json::array({{{"type", "function_call_output"}, {"output", "x"}}})}}).param, "input[0].call_id");
  EXPECT_EQ(parsed_error({{"input", "x"}, {"background", true}}).param, "background");
  EXPECT_EQ(parsed_error({{"input", "x"}, {"tool_choice", "required"}}).param, "tool_choice");
  EXPECT_EQ(parsed_error({{"input", "x"}, {"max_output_tokens", 0}}).param, "max_output_tokens");
}

TEST(ResponsesApi, OutputItemsAndStatusFollowTheReply) {
  ParsedAssistant reply;
  reply.content = "Checking.";
  reply.tool_calls = {ToolCall{.id = "call_a", .name = "f", .arguments = R"({"x": 1})"}};
  const auto output = response_output("resp_abc", reply);
  ASSERT_EQ(output.size(), 2u);
  EXPECT_EQ(output[0]["id"], "msg_abc");
  EXPECT_EQ(output[0]["content"][0]["text"], "Checking.");
  EXPECT_EQ(output[1]["type"], "function_call");
  EXPECT_EQ(output[1]["call_id"], "call_a");
  EXPECT_EQ(output[1]["arguments"], R"({"x": 1})");
  const json message = reply_message(reply);
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"x": 1})");
  scheduler::StreamEvent done{.kind = scheduler::StreamEvent::Kind::done};
  EXPECT_STREQ(response_status(done), "completed");
  done.finish = scheduler::FinishReason::length;
  EXPECT_STREQ(response_status(done), "incomplete");
}

TEST(ResponseStore, KeepsResponsesPerTenantWithinItsBytesAndAge) {
  ResponseStore store(2000, 60s);
  const auto t0 = ResponseStore::Clock::now();
  const StoredResponse small{.object = {{"id", "r"}}, .conversation = json::array({{{"role", "user"}, {"content", std::string(300, 'x')}}})};
  store.put("a", "r1", small, t0);
  ASSERT_TRUE(store.find("a", "r1", t0).has_value());
  EXPECT_FALSE(store.find("b", "r1", t0).has_value()) << "another tenant never sees it";
  EXPECT_FALSE(store.erase("b", "r1"));
  // Room for a few: the least recently used goes first.
  store.put("a", "r2", small, t0);
  store.put("a", "r3", small, t0);
  store.find("a", "r1", t0);  // r1 is now the most recent
  for (int i = 4; i < 7; ++i) store.put("a", "r" + std::to_string(i), small, t0);
  EXPECT_TRUE(store.find("a", "r1", t0).has_value());
  EXPECT_FALSE(store.find("a", "r2", t0).has_value());
  EXPECT_LE(store.stats().bytes, 2000u);
  EXPECT_GT(store.stats().evicted, 0u);
  // Age counts from storing.
  EXPECT_FALSE(store.find("a", "r1", t0 + 61s).has_value());
  EXPECT_EQ(store.stats().responses, 0u);
  // Larger than the whole store: not kept.
  store.put("a", "huge", StoredResponse{.object = {{"x", std::string(5000, 'y')}}}, t0);
  EXPECT_FALSE(store.find("a", "huge", t0).has_value());
  store.put("a", "r1", small, t0);
  EXPECT_TRUE(store.erase("a", "r1"));
  EXPECT_FALSE(store.find("a", "r1", t0).has_value());
}

}  // namespace
}  // namespace prefixd::api
