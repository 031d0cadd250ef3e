// Tools, schemas, call arguments and template kwargs keep the key order a client sent, through
// every protocol's parser, the chat template of the generated models and the control plane's
// stored form: the prompt holds a tool as Hugging Face's `tojson` (Python's
// json.dumps(obj, ensure_ascii=False)) and llama-server write it, never with its keys sorted.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "api/anthropic/anthropic_messages.h"
#include "api/control/cache_keys.h"
#include "api/control/cache_modules.h"
#include "api/openai/request_parser.h"
#include "api/prompt/chat_template.h"
#include "api/responses/responses_api.h"
#include "api/routing/cache_routing.h"
#include "modelgen/vocab.h"

namespace prefixd::api {
namespace {

using nlohmann::ordered_json;

// A function whose keys are nowhere sorted: "name" before "description", "zeta" before "alpha",
// "type" before "properties" before "required"; with a non-ASCII character, which tojson keeps.
constexpr std::string_view kFunction =
    R"({"name": "get_weather", "description": "Météo for a city", "parameters": {"type": "object", "properties": )"
    R"({"zeta": {"type": "string", "description": "the city"}, "alpha": {"type": "integer", "minimum": 1}}, )"
    R"("required": ["zeta", "alpha"]}})";

// python3 -c 'import json; print(json.dumps({"type": "function", "function": FUNCTION}, ensure_ascii=False))'
// for kFunction: what Hugging Face's tojson renders for the tool as an OpenAI client sends it.
constexpr std::string_view kToolAsTojson =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Météo for a city", "parameters": )"
    R"({"type": "object", "properties": {"zeta": {"type": "string", "description": "the city"}, "alpha": )"
    R"({"type": "integer", "minimum": 1}}, "required": ["zeta", "alpha"]}}})";

// json.dumps({"zeta": "Oslo", "alpha": 3}, ensure_ascii=False): call arguments sent as an object.
constexpr std::string_view kArgumentsAsTojson = R"({"zeta": "Oslo", "alpha": 3})";

std::string with(std::string_view text, std::string_view hole, std::string_view value) {
  std::string out(text);
  out.replace(out.find(hole), hole.size(), value);
  return out;
}

// The chat template every generated test model carries (`prefixd-mkmodel`): Qwen 2.5's shape,
// tools printed one per line with `tojson`, object arguments with `tojson`.
const ChatTemplate& generated_model_template() {
  static const ChatTemplate tmpl = [] {
    auto created = ChatTemplate::create(std::string(modelgen::chat_template()));
    EXPECT_TRUE(created.has_value()) << (created ? "" : created.error());
    return std::move(*created);
  }();
  return tmpl;
}

std::string rendered(const ChatRequest& request) {
  auto text = generated_model_template().render(request.chat);
  EXPECT_TRUE(text.has_value()) << (text ? "" : text.error());
  return text.value_or("");
}

ParseOptions options() {
  ParseOptions out;
  out.model_names = {"tiny"};
  return out;
}

TEST(ToolKeyOrder, ChatCompletionsRendersToolsArgumentsAndKwargsInTheOrderSent) {
  const std::string body = with(
      R"({"messages": [{"role": "system", "content": "You forecast."}, {"role": "user", "content": "Oslo?"},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": {"zeta": "Oslo", "alpha": 3}}}]},
          {"role": "tool", "tool_call_id": "call_1", "content": "rain"}],
        "tools": [{"type": "function", "function": FUNCTION}],
        "chat_template_kwargs": {"zeta": 1, "alpha": 2}})",
      "FUNCTION", kFunction);
  const auto parsed = parse_chat_request(body, options());
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  const std::string prompt = rendered(*parsed);
  EXPECT_NE(prompt.find("<tools>\n" + std::string(kToolAsTojson) + "\n</tools>"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find(R"("arguments": )" + std::string(kArgumentsAsTojson) + "}"), std::string::npos) << prompt;
  EXPECT_EQ(parsed->chat.extra_context.dump(), R"({"zeta":1,"alpha":2})");
  EXPECT_EQ(parsed->tools.dump(), ordered_json::parse(body)["tools"].dump()) << "the tools as sent";
}

TEST(ToolKeyOrder, TheMessagesApiRendersItsToolsAsChatCompletionsDoes) {
  const std::string body = with(
      R"({"model": "tiny", "max_tokens": 8, "system": "You forecast.",
        "messages": [{"role": "user", "content": "Oslo?"},
          {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                             "input": {"zeta": "Oslo", "alpha": 3}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"}]}],
        "tools": [FUNCTION]})",
      "FUNCTION", with(kFunction, R"("parameters")", R"("input_schema")"));
  const auto parsed = parse_messages_request(body, options(), MessagesRoute::create);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  const std::string prompt = rendered(parsed->chat);
  EXPECT_NE(prompt.find("<tools>\n" + std::string(kToolAsTojson) + "\n</tools>"), std::string::npos) << prompt;
  // A tool_use input becomes compact arguments text, keys in the order sent (rendered verbatim).
  EXPECT_NE(prompt.find(R"("arguments": {"zeta":"Oslo","alpha":3}})"), std::string::npos) << prompt;
}

TEST(ToolKeyOrder, TheResponsesApiRendersItsToolsAsChatCompletionsDoes) {
  const std::string flat_tool = with(kFunction, R"({"name")", R"({"type": "function", "name")");
  const std::string body = with(R"({"instructions": "You forecast.", "input": "Oslo?", "tools": [TOOL]})", "TOOL", flat_tool);
  const auto parsed = parse_responses_request(body, options());
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  EXPECT_EQ(parsed->tools.dump(), ordered_json::parse(body)["tools"].dump()) << "echoed as sent";
  const std::string prompt = rendered(parsed->chat);
  EXPECT_NE(prompt.find("<tools>\n" + std::string(kToolAsTojson) + "\n</tools>"), std::string::npos) << prompt;
}

TEST(ToolKeyOrder, AKeysConversationAndItsManifestKeepTheOrderSent) {
  const auto tools = ordered_json::parse(with("[{\"type\": \"function\", \"function\": FUNCTION}]", "FUNCTION", kFunction));
  const auto messages = ordered_json::parse(
      R"([{"role": "user", "content": "Oslo?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c",
          "type": "function", "function": {"name": "get_weather", "arguments": {"zeta": "Oslo", "alpha": 3}}}]}])");
  const KeyConversation conversation{.messages = messages,
                                     .tools = tools,
                                     .chat_template_kwargs = ordered_json::parse(R"({"zeta": 1, "alpha": 2})")};
  // Stored in an artifact's manifest and read back, as a load rebuilds the key it is loaded into.
  const ArtifactManifest manifest{.kind = "key", .key = "weather", .conversation = conversation};
  const auto decoded = ArtifactManifest::decode(manifest.encode());
  ASSERT_TRUE(decoded.has_value());
  ASSERT_TRUE(decoded->conversation.has_value());
  EXPECT_EQ(decoded->conversation->tools.dump(), tools.dump());
  EXPECT_EQ(decoded->conversation->messages.dump(), messages.dump());
  EXPECT_EQ(decoded->conversation->chat_template_kwargs.dump(), R"({"zeta":1,"alpha":2})");
  EXPECT_NE(manifest.encode().find(tools.dump()), std::string::npos) << "the manifest holds the tools as sent";
}

TEST(ToolKeyOrder, AModulesFingerprintFollowsTheKeyOrderItRendersIn) {
  const std::string tools = with("[{\"type\": \"function\", \"function\": FUNCTION}]", "FUNCTION", kFunction);
  const auto body = ordered_json::parse(with(R"({"modules": [{"module_id": "tools", "tools": TOOLS}]})", "TOOLS", tools));
  const auto modules = parse_modules(body);
  ASSERT_TRUE(modules.has_value()) << modules.error().message;
  EXPECT_EQ(chain_through(*modules, 0).tools.dump(), ordered_json::parse(tools).dump());
  // The same tool with its keys sorted renders other tokens, so it is another module.
  const auto sorted_body = ordered_json::parse(nlohmann::json::parse(body.dump()).dump());
  const auto sorted = parse_modules(sorted_body);
  ASSERT_TRUE(sorted.has_value());
  EXPECT_NE(chain_fingerprints("root", *modules), chain_fingerprints("root", *sorted));
  EXPECT_EQ(chain_fingerprints("root", *modules), chain_fingerprints("root", *parse_modules(ordered_json::parse(body.dump()))));
}

// A router asks a backend for the block chain of the request it routes: the backend must render the
// request as sent, or it names the blocks of a prompt the request does not have.
TEST(ToolKeyOrder, AChainQueryHandsTheRequestOnAsSent) {
  const std::string request = with(R"({"messages": [{"role": "user", "content": "Oslo?"}], "tools": [TOOL]})", "TOOL",
                                   with("{\"type\": \"function\", \"function\": FUNCTION}", "FUNCTION", kFunction));
  const auto query = parse_chain_query(R"({"endpoint": "chat", "request": )" + request + "}", kDefaultMaxJsonNodes);
  ASSERT_TRUE(query.has_value()) << query.error().message;
  EXPECT_EQ(query->request_body, ordered_json::parse(request).dump());
}

}  // namespace
}  // namespace prefixd::api
