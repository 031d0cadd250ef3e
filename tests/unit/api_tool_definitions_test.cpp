// One tool list, three wire protocols: each adapter checks function tools the same way and hands
// the chat template the same definitions, so a conversation keeps its tokens when an agent
// switches protocol.
#include <gtest/gtest.h>

#include <string>

#include "api/anthropic/anthropic_messages.h"
#include "api/openai/request_parser.h"
#include "api/responses/responses_api.h"
#include "api/body/field_reader.h"
#include "api/tools/tool_definitions.h"

namespace prefixd::api {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ParseOptions options() {
  ParseOptions o;
  o.model_names = {"tiny"};
  return o;
}

const ordered_json kSchema = ordered_json::parse(R"({"type": "object", "properties": {"path": {"type": "string"}}})");

TEST(ToolDefinitions, TheSameFunctionReachesTheTemplateAlikeThroughEveryProtocol) {
  // Bodies keep their keys in the order written here, as clients send them (the envelope's "type"
  // first): the template prints them in that order, so every protocol must hand over the same order.
  const ordered_json function = {{"name", "read_file"}, {"description", "Reads a file."}, {"parameters", kSchema}, {"strict", true}};
  const ordered_json chat_body = {{"model", "tiny"},
                                  {"messages", ordered_json::array({{{"role", "user"}, {"content", "hi"}}})},
                                  {"tools", ordered_json::array({{{"type", "function"}, {"function", function}}})}};
  ordered_json responses_tool = {{"type", "function"}};
  for (const auto& [key, value] : function.items()) responses_tool[key] = value;
  const ordered_json responses_body = {{"model", "tiny"}, {"input", "hi"}, {"tools", ordered_json::array({responses_tool})}};

  const auto chat = parse_chat_request(chat_body.dump(), options());
  ASSERT_TRUE(chat.has_value()) << chat.error().message;
  const auto responses = parse_responses_request(responses_body.dump(), options());
  ASSERT_TRUE(responses.has_value()) << responses.error().message;
  EXPECT_EQ(responses->chat.tools, chat->tools) << "`strict` and every other function key survive the Responses form";

  // The Messages form has no `strict`: the same function without it, its schema as input_schema.
  const ordered_json messages_body = {
      {"model", "tiny"}, {"max_tokens", 8},
      {"messages", ordered_json::array({{{"role", "user"}, {"content", "hi"}}})},
      {"tools", ordered_json::array({{{"name", "read_file"}, {"description", "Reads a file."}, {"input_schema", kSchema},
                                      {"cache_control", {{"type", "ephemeral"}}}}})}};
  const auto messages = parse_messages_request(messages_body.dump(), options(), MessagesRoute::create);
  ASSERT_TRUE(messages.has_value()) << messages.error().message;
  ordered_json without_strict = chat->tools;
  without_strict[0]["function"].erase("strict");
  EXPECT_EQ(messages->chat.tools, without_strict) << "the envelope (cache_control) is not the function's";
}

TEST(ToolDefinitions, EveryProtocolRefusesTheSameMistakesNamingItsOwnField) {
  const json bad_name = {{"name", "read file"}, {"parameters", kSchema}};
  const json chat_body = {{"model", "tiny"},
                          {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                          {"tools", json::array({{{"type", "function"}, {"function", bad_name}}})}};
  const auto chat = parse_chat_request(chat_body.dump(), options());
  ASSERT_FALSE(chat.has_value());
  EXPECT_EQ(chat.error().param, "tools[0].function.name");

  json responses_tool = bad_name;
  responses_tool["type"] = "function";
  const auto responses = parse_responses_request(
      json{{"model", "tiny"}, {"input", "hi"}, {"tools", json::array({responses_tool})}}.dump(), options());
  ASSERT_FALSE(responses.has_value());
  EXPECT_EQ(responses.error().param, "tools[0].name");

  const json twice = {{"type", "function"}, {"name", "f"}, {"parameters", json::array()}};
  const auto not_a_schema = parse_responses_request(
      json{{"model", "tiny"}, {"input", "hi"}, {"tools", json::array({twice})}}.dump(), options());
  ASSERT_FALSE(not_a_schema.has_value());
  EXPECT_EQ(not_a_schema.error().param, "tools[0].parameters");

  const json tool = {{"name", "f"}, {"input_schema", kSchema}};
  const auto messages = parse_messages_request(
      json{{"model", "tiny"}, {"max_tokens", 8}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
           {"tools", json::array({tool, tool})}}
          .dump(),
      options(), MessagesRoute::create);
  ASSERT_FALSE(messages.has_value());
  EXPECT_EQ(messages.error().param, "tools[1].name") << "defined twice";
}

TEST(ToolDefinitions, NamesFollowTheLimitOfTheProtocolAndKeepTheClientsKeyOrder) {
  FunctionTools openai;
  EXPECT_THROW((openai.add({{"name", std::string(65, 'a')}}, "n", "p")), fields::Rejection);
  FunctionTools anthropic(128);
  anthropic.add({{"name", std::string(65, 'a')}}, "n", "p");
  anthropic.add(ordered_json::parse(R"({"name": "b", "parameters": {"type": "object", "required": [], "properties": {}}})"), "n", "p");
  // As the template renders them and a grammar reads them: the envelope first, as OpenAI clients
  // send it, then the function's keys in the order sent.
  EXPECT_EQ(anthropic.tools()[1].dump(),
            R"({"type":"function","function":{"name":"b","parameters":{"type":"object","required":[],"properties":{}}}})");
  FunctionTools nulls;
  nulls.add({{"name", "c"}, {"parameters", nullptr}}, "n", "p");
  EXPECT_FALSE(nulls.tools()[0]["function"].contains("parameters")) << "null parameters mean none";
}

}  // namespace
}  // namespace prefixd::api
