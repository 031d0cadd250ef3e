// Request validation: every rejection rule of /v1/chat/completions and /v1/completions, as a pure
// function from JSON text to a parsed request or the ApiError the server answers with.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "api/openai/request_parser.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

ParseOptions options() {
  ParseOptions o;
  o.model_names = {"tiny", "tiny-alias"};
  o.vocab_size = 1000;
  return o;
}

json chat_body(json extra = json::object()) {
  json body = {{"model", "tiny"}, {"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

ChatRequest chat_ok(const json& body, const ParseOptions& o = options()) {
  auto parsed = parse_chat_request(body.dump(), o);
  EXPECT_TRUE(parsed.has_value()) << (parsed ? "" : parsed.error().message);
  return parsed.value_or(ChatRequest{});
}

ApiError chat_error(const std::string& body, const ParseOptions& o = options()) {
  auto parsed = parse_chat_request(body, o);
  EXPECT_FALSE(parsed.has_value()) << body;
  return parsed ? ApiError{} : parsed.error();
}

ApiError chat_error(const json& body) { return chat_error(body.dump()); }

ApiError completion_error(const json& body) {
  auto parsed = parse_completion_request(body.dump(), options());
  EXPECT_FALSE(parsed.has_value()) << body.dump();
  return parsed ? ApiError{} : parsed.error();
}

CompletionRequest completion_ok(const json& body) {
  auto parsed = parse_completion_request(body.dump(), options());
  EXPECT_TRUE(parsed.has_value()) << (parsed ? "" : parsed.error().message);
  return parsed.value_or(CompletionRequest{});
}

TEST(ApiRequestParser, MinimalChatRequestGetsDefaults) {
  const auto request = chat_ok(chat_body());
  EXPECT_EQ(request.params.max_tokens, -1);
  EXPECT_FALSE(request.params.stream);
  EXPECT_TRUE(request.params.stop.empty());
  EXPECT_TRUE(request.params.cache.enabled);
  EXPECT_EQ(request.params.cache.session_key, "");
  EXPECT_EQ(request.chat.messages.size(), 1u);
  EXPECT_TRUE(request.chat.add_generation_prompt);
  EXPECT_EQ(request.tool_choice, "none");
  const engine::SamplingParams defaults;
  EXPECT_EQ(request.params.sampling.temperature, defaults.temperature);
  EXPECT_EQ(request.params.sampling.top_k, defaults.top_k);
}

TEST(ApiRequestParser, ARequestWithoutASeedGetsTheServersAndItsOwnWins) {
  EXPECT_EQ(chat_ok(chat_body()).params.sampling.seed, engine::kRandomSeed) << "no --seed: a random one";
  ParseOptions seeded = options();
  seeded.default_seed = 11;
  EXPECT_EQ(chat_ok(chat_body(), seeded).params.sampling.seed, 11U);
  EXPECT_EQ(chat_ok(chat_body({{"seed", 3}}), seeded).params.sampling.seed, 3U);
  EXPECT_EQ(chat_ok(chat_body({{"seed", -1}}), seeded).params.sampling.seed, engine::kRandomSeed)
      << "a request can still ask for a random seed";
}

TEST(ApiRequestParser, MalformedJsonIs400) {
  const auto error = chat_error(std::string(R"({"messages": [)"));
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.code, "invalid_json");
  EXPECT_EQ(chat_error(std::string("[1,2]")).status, 400);
  EXPECT_EQ(chat_error(std::string("")).status, 400);
}

// nlohmann's parser stops at a NUL byte: what follows one would be ignored, not refused.
TEST(ApiRequestParser, ABodyWithANulByteIsNotJson) {
  const std::string body = chat_body().dump() + std::string(1, '\0') + R"("prompt_cache_key": "hidden"})";
  const auto error = chat_error(body);
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.code, "invalid_json");
}

TEST(ApiRequestParser, UnknownModelIs404ModelNotFound) {
  const auto error = chat_error(chat_body({{"model", "gpt-4"}}));
  EXPECT_EQ(error.status, 404);
  EXPECT_EQ(error.code, "model_not_found");
  EXPECT_EQ(error.param, "model");
  EXPECT_EQ(chat_error(chat_body({{"model", 7}})).status, 400);
}

TEST(ApiRequestParser, AliasAndMissingModelAreAccepted) {
  chat_ok(chat_body({{"model", "tiny-alias"}}));
  json body = chat_body();
  body.erase("model");
  chat_ok(body);
  chat_ok(chat_body({{"model", nullptr}}));
}

TEST(ApiRequestParser, MessagesMustBeANonEmptyArrayOfRoleContentObjects) {
  json body = chat_body();
  body.erase("messages");
  EXPECT_EQ(chat_error(body).param, "messages");
  EXPECT_EQ(chat_error(chat_body({{"messages", json::array()}})).status, 400);
  EXPECT_EQ(chat_error(chat_body({{"messages", "hello"}})).status, 400);
  EXPECT_EQ(chat_error(chat_body({{"messages", json::array({"hello"})}})).param, "messages[0]");
  EXPECT_EQ(chat_error(chat_body({{"messages", json::array({{{"content", "x"}}})}})).param, "messages[0].role");
  EXPECT_EQ(chat_error(chat_body({{"messages", json::array({{{"role", "user"}}})}})).param, "messages[0].content");
  EXPECT_EQ(chat_error(chat_body({{"messages", json::array({{{"role", "user"}, {"content", 5}}})}})).param,
            "messages[0].content");
}

TEST(ApiRequestParser, TextContentPartsAreFlattenedAndImagesRefused) {
  const json parts = json::array({{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}});
  const auto request = chat_ok(chat_body({{"messages", json::array({{{"role", "user"}, {"content", parts}}})}}));
  EXPECT_EQ(request.chat.messages[0]["content"], "a\nb");
  const json image = json::array({{{"type", "image_url"}, {"image_url", {{"url", "http://x/y.png"}}}}});
  EXPECT_EQ(chat_error(chat_body({{"messages", json::array({{{"role", "user"}, {"content", image}}})}})).status, 400);
}

TEST(ApiRequestParser, UnknownRolesNamesAndPartsAreRefusedWithTheirPath) {
  auto param = [](const json& messages) { return chat_error(chat_body({{"messages", messages}})).param; };
  const json user = {{"role", "user"}, {"content", "hi"}};
  EXPECT_EQ(param(json::array({user, {{"role", "narrator"}, {"content", "x"}}})), "messages[1].role");
  EXPECT_EQ(param(json::array({{{"role", "function"}, {"content", "x"}}})), "messages[0].role");
  EXPECT_EQ(param(json::array({{{"role", "User"}, {"content", "x"}}})), "messages[0].role");
  EXPECT_EQ(param(json::array({{{"role", "user"}, {"content", "x"}, {"name", json::array()}}})), "messages[0].name");
  const json parts = json::array({{{"type", "text"}, {"text", "a"}}, {{"type", "input_video"}}});
  EXPECT_EQ(param(json::array({{{"role", "user"}, {"content", parts}}})), "messages[0].content[1].type");
  EXPECT_EQ(param(json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", 1}}})}}})),
            "messages[0].content[0].text");
  EXPECT_EQ(param(json::array({{{"role", "user"}, {"content", json::array({"a"})}}})), "messages[0].content[0]");
  const json call = {{"id", "c1"}, {"type", "custom"}, {"function", {{"name", "f"}}}};
  EXPECT_EQ(param(json::array({user, {{"role", "assistant"}, {"tool_calls", json::array({call})}}})),
            "messages[1].tool_calls[0].type");
  // A string name passes the parser; whether the template can express it is the prompt builder's call.
  EXPECT_EQ(chat_ok(chat_body({{"messages", json::array({{{"role", "user"}, {"content", "x"}, {"name", "ann"}}})}}))
                .chat.messages[0]["name"],
            "ann");
}

TEST(ApiRequestParser, BodiesNestedTooDeepAreRefused) {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  const std::string shallow = R"({"messages": [{"role": "user", "content": "hi", "x": )" + nested(100) + "}]}";
  EXPECT_TRUE(parse_chat_request(shallow, options()).has_value());
  const std::string deep = R"({"messages": [{"role": "user", "content": "hi", "x": )" + nested(1000000) + "}]}";
  const ApiError error = chat_error(deep);
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.code, "json_too_deep") << error.message;
  EXPECT_EQ(parse_json_object("[" + nested(200) + "]", kDefaultMaxJsonNodes).error().status, 400);
}

TEST(ApiRequestParser, DeveloperRoleBecomesSystem) {
  const auto request = chat_ok(chat_body({{"messages", json::array({{{"role", "developer"}, {"content", "rules"}},
                                                                   {{"role", "user"}, {"content", "hi"}}})}}));
  EXPECT_EQ(request.chat.messages[0]["role"], "system");
}

TEST(ApiRequestParser, AssistantToolCallsMayOmitContent) {
  const json call = {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}};
  const json messages = json::array({{{"role", "user"}, {"content", "x"}},
                                     {{"role", "assistant"}, {"tool_calls", json::array({call})}},
                                     {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}}});
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  const auto request = chat_ok(chat_body({{"messages", messages}, {"tools", tools}}));
  EXPECT_TRUE(request.chat.messages[1]["content"].is_null());
  EXPECT_EQ(request.tool_choice, "auto");
  EXPECT_EQ(request.chat.tools, tools);
  const json bad_call = json::array({{{"role", "assistant"}, {"tool_calls", json::array({{{"type", "function"}}})}}});
  EXPECT_EQ(chat_error(chat_body({{"messages", bad_call}})).status, 400);
}

TEST(ApiRequestParser, AToolMessageNamesTheCallItAnswers) {
  const json call = {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}};
  for (const json& tool : {json{{"role", "tool"}, {"content", "42"}}, json{{"role", "tool"}, {"tool_call_id", ""}, {"content", "42"}},
                           json{{"role", "tool"}, {"tool_call_id", 7}, {"content", "42"}}}) {
    const json messages = json::array({{{"role", "user"}, {"content", "x"}},
                                       {{"role", "assistant"}, {"tool_calls", json::array({call})}}, tool});
    const auto error = chat_error(chat_body({{"messages", messages}}));
    EXPECT_EQ(error.status, 400) << tool;
    EXPECT_EQ(error.param, "messages[2].tool_call_id") << tool;
    EXPECT_NE(error.message.find("names the tool call it answers"), std::string::npos) << error.message;
  }
}

TEST(ApiRequestParser, ToolsAndToolChoiceAreValidated) {
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  EXPECT_EQ(chat_error(chat_body({{"tools", "f"}})).param, "tools");
  EXPECT_EQ(chat_error(chat_body({{"tools", json::array({{{"type", "function"}}})}})).param, "tools[0].function");
  const json named = {{"type", "function"}, {"function", {{"name", "f"}}}};
  EXPECT_EQ(chat_error(chat_body({{"tools", json::array({named, named})}})).param, "tools[1].function.name") << "defined twice";
  EXPECT_EQ(chat_error(chat_body({{"tools", json::array({{{"type", "function"}, {"function", {{"name", "a b"}}}}})}})).param,
            "tools[0].function.name");
  EXPECT_EQ(chat_error(chat_body({{"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", 3}}}}})}})).param,
            "tools[0].function.parameters");
  EXPECT_EQ(chat_error(chat_body({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}})).param,
            "tool_choice.function.name")
      << "a named function must be one of the tools";
  EXPECT_EQ(chat_ok(chat_body({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}})).tools.dump(),
            tools.dump());
  EXPECT_EQ(chat_error(chat_body({{"tools", tools}, {"tool_choice", "sometimes"}})).param, "tool_choice");
  EXPECT_EQ(chat_error(chat_body({{"tool_choice", "required"}})).param, "tool_choice");
  // tool_choice "none" keeps the tools out of the prompt but in the signature inputs.
  const auto none = chat_ok(chat_body({{"tools", tools}, {"tool_choice", "none"}}));
  EXPECT_TRUE(none.chat.tools.is_null());
  EXPECT_EQ(none.tools, tools);
  const auto required = chat_ok(chat_body({{"tools", tools}, {"tool_choice", "required"}}));
  EXPECT_EQ(required.tool_choice, "required");
}

TEST(ApiRequestParser, ResponseFormatIsValidatedAndKeepsTheSchemasKeyOrder) {
  EXPECT_EQ(chat_ok(chat_body({{"response_format", {{"type", "text"}}}})).response_format.kind, OutputFormat::Kind::text);
  EXPECT_EQ(chat_ok(chat_body({{"response_format", {{"type", "json_object"}}}})).response_format.kind, OutputFormat::Kind::json_object);
  EXPECT_EQ(chat_error(chat_body({{"response_format", "json"}})).param, "response_format");
  EXPECT_EQ(chat_error(chat_body({{"response_format", {{"type", "yaml"}}}})).param, "response_format.type");
  EXPECT_EQ(chat_error(chat_body({{"response_format", {{"type", "json_schema"}}}})).param, "response_format.json_schema");
  EXPECT_EQ(chat_error(chat_body({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}})).param,
            "response_format.json_schema.schema");
  // Key order as sent: "zeta" before "alpha" (a sorted parse would swap them).
  const std::string body =
      R"({"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"r",)"
      R"("schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}}}}})";
  const auto parsed = parse_chat_request(body, ParseOptions{});
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->response_format.kind, OutputFormat::Kind::json_schema);
  EXPECT_EQ(parsed->response_format.schema["properties"].begin().key(), "zeta");
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  EXPECT_EQ(chat_error(chat_body({{"tools", tools}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}})).param,
            "response_format");
}

TEST(ApiRequestParser, SamplingRangesAreEnforced) {
  EXPECT_EQ(chat_error(chat_body({{"temperature", -0.1}})).param, "temperature");
  EXPECT_EQ(chat_error(chat_body({{"temperature", 2.5}})).param, "temperature");
  EXPECT_EQ(chat_error(chat_body({{"temperature", "hot"}})).param, "temperature");
  EXPECT_EQ(chat_error(chat_body({{"top_p", 0}})).param, "top_p");
  EXPECT_EQ(chat_error(chat_body({{"top_p", 1.01}})).param, "top_p");
  EXPECT_EQ(chat_error(chat_body({{"top_k", -1}})).param, "top_k");
  EXPECT_EQ(chat_error(chat_body({{"top_k", 2.5}})).param, "top_k");
  EXPECT_EQ(chat_error(chat_body({{"min_p", 1.5}})).param, "min_p");
  EXPECT_EQ(chat_error(chat_body({{"seed", "abc"}})).param, "seed");
  EXPECT_EQ(chat_error(chat_body({{"presence_penalty", 3}})).param, "presence_penalty");
  const auto request = chat_ok(chat_body({{"temperature", 1.5}, {"top_p", 0.5}, {"top_k", 7}, {"min_p", 0.1}, {"seed", 42}}));
  EXPECT_FLOAT_EQ(request.params.sampling.temperature, 1.5f);
  EXPECT_FLOAT_EQ(request.params.sampling.top_p, 0.5f);
  EXPECT_EQ(request.params.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(request.params.sampling.min_p, 0.1f);
  EXPECT_EQ(request.params.sampling.seed, 42u);
  EXPECT_FALSE(request.params.sampling.ignore_eos);
  EXPECT_TRUE(chat_ok(chat_body({{"ignore_eos", true}})).params.sampling.ignore_eos);
  EXPECT_EQ(chat_error(chat_body({{"ignore_eos", "yes"}})).param, "ignore_eos");
}

TEST(ApiRequestParser, ZeroTemperatureIsGreedy) {
  const auto request = chat_ok(chat_body({{"temperature", 0}, {"top_k", 50}}));
  EXPECT_EQ(request.params.sampling.temperature, 0.0f);
  EXPECT_EQ(request.params.sampling.top_k, 1);
}

TEST(ApiRequestParser, NegativeSeedMeansRandom) {
  EXPECT_EQ(chat_ok(chat_body({{"seed", -1}})).params.sampling.seed, 0xFFFFFFFFu);
}

TEST(ApiRequestParser, MaxTokensAndItsAliases) {
  EXPECT_EQ(chat_ok(chat_body({{"max_tokens", 16}})).params.max_tokens, 16);
  EXPECT_EQ(chat_ok(chat_body({{"max_completion_tokens", 8}, {"max_tokens", 16}})).params.max_tokens, 8);
  EXPECT_EQ(chat_ok(chat_body({{"n_predict", -1}})).params.max_tokens, -1);
  EXPECT_EQ(chat_ok(chat_body({{"n_predict", 5}})).params.max_tokens, 5);
  EXPECT_EQ(chat_error(chat_body({{"max_tokens", -1}})).param, "max_tokens");
  EXPECT_EQ(chat_error(chat_body({{"max_tokens", -100}})).status, 400);
  EXPECT_EQ(chat_error(chat_body({{"max_tokens", 0}})).param, "max_tokens");
  // The message states the range that is enforced.
  EXPECT_EQ(chat_error(chat_body({{"max_tokens", 0}})).message, "'max_tokens' must be in [1, 2147483647], got 0");
  EXPECT_EQ(chat_error(chat_body({{"max_tokens", 4294967296LL}})).message,
            "'max_tokens' must be in [1, 2147483647], got 4294967296");
  EXPECT_EQ(chat_error(chat_body({{"max_tokens", "many"}})).param, "max_tokens");
  EXPECT_EQ(chat_error(chat_body({{"max_completion_tokens", 0}})).param, "max_completion_tokens");
}

TEST(ApiRequestParser, StopIsAStringOrAnArrayOfUpTo16) {
  EXPECT_EQ(chat_ok(chat_body({{"stop", "\n"}})).params.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(chat_ok(chat_body({{"stop", {"a", "b"}}})).params.stop, (std::vector<std::string>{"a", "b"}));
  json many = json::array();
  for (int i = 0; i < 17; ++i) many.push_back("s" + std::to_string(i));
  EXPECT_EQ(chat_error(chat_body({{"stop", many}})).param, "stop");
  EXPECT_EQ(chat_error(chat_body({{"stop", 3}})).param, "stop");
  EXPECT_EQ(chat_error(chat_body({{"stop", {"a", 3}}})).param, "stop");
  EXPECT_EQ(chat_error(chat_body({{"stop", ""}})).param, "stop");
}

TEST(ApiRequestParser, OnlyOneChoiceIsSupported) {
  EXPECT_EQ(chat_error(chat_body({{"n", 2}})).param, "n");
  chat_ok(chat_body({{"n", 1}}));
}

TEST(ApiRequestParser, StreamFlagsAreBooleans) {
  const auto request = chat_ok(chat_body({{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  EXPECT_TRUE(request.params.stream);
  EXPECT_TRUE(request.params.include_usage);
  EXPECT_EQ(chat_error(chat_body({{"stream", "yes"}})).param, "stream");
  EXPECT_EQ(chat_error(chat_body({{"stream_options", 1}})).param, "stream_options");
}

TEST(ApiRequestParser, CacheFieldsComeFromRootOrExtraBody) {
  auto request = chat_ok(chat_body({{"cache_prompt", false}, {"prompt_cache_key", "k"}, {"user", "u"}, {"cache_salt", "s"}}));
  EXPECT_FALSE(request.params.cache.enabled);
  EXPECT_EQ(request.params.cache.session_key, "k");
  EXPECT_EQ(request.params.cache.salt, "s");

  request = chat_ok(chat_body({{"extra_body", {{"cache_prompt", false}, {"prompt_cache_key", "k2"}, {"cache_salt", "s2"}}}}));
  EXPECT_FALSE(request.params.cache.enabled);
  EXPECT_EQ(request.params.cache.session_key, "k2");
  EXPECT_EQ(request.params.cache.salt, "s2");

  request = chat_ok(chat_body({{"user", "alice"}}));
  EXPECT_EQ(request.params.cache.session_key, "alice");

  EXPECT_EQ(chat_error(chat_body({{"cache_prompt", "no"}})).param, "cache_prompt");
  EXPECT_EQ(chat_error(chat_body({{"extra_body", 3}})).param, "extra_body");
  EXPECT_EQ(chat_error(chat_body({{"user", 3}})).param, "user");
}

TEST(ApiRequestParser, CacheSaltIsAbsentOrANonEmptyString) {
  EXPECT_FALSE(chat_ok(chat_body({})).params.cache.salt.has_value());
  const ApiError empty = chat_error(chat_body({{"cache_salt", ""}}));
  EXPECT_EQ(empty.status, 400);
  EXPECT_EQ(empty.param, "cache_salt");
  EXPECT_EQ(chat_error(chat_body({{"extra_body", {{"cache_salt", ""}}}})).param, "cache_salt");
  EXPECT_EQ(chat_error(chat_body({{"cache_salt", 7}})).param, "cache_salt");
}

TEST(ApiRequestParser, ServerWideNoCachePromptWins) {
  auto o = options();
  o.cache_prompt_default = false;
  EXPECT_FALSE(chat_ok(chat_body({{"cache_prompt", true}}), o).params.cache.enabled);
}

TEST(ApiRequestParser, ChatTemplateKwargsMustBeAnObjectWithoutReservedNames) {
  const auto request = chat_ok(chat_body({{"chat_template_kwargs", {{"enable_thinking", false}}}}));
  EXPECT_EQ(request.chat.extra_context, json({{"enable_thinking", false}}));
  EXPECT_EQ(chat_ok(chat_body({{"extra_body", {{"chat_template_kwargs", {{"a", 1}}}}}})).chat.extra_context, json({{"a", 1}}));
  EXPECT_EQ(chat_error(chat_body({{"chat_template_kwargs", "x"}})).param, "chat_template_kwargs");
  EXPECT_EQ(chat_error(chat_body({{"chat_template_kwargs", {{"messages", json::array()}}}})).param, "chat_template_kwargs");
}

TEST(ApiRequestParser, LogprobsFollowOpenAisTwoShapes) {
  EXPECT_EQ(chat_ok(chat_body()).params.logprobs, -1);
  EXPECT_EQ(chat_ok(chat_body({{"logprobs", false}})).params.logprobs, -1);
  EXPECT_EQ(chat_ok(chat_body({{"logprobs", true}})).params.logprobs, 0);
  EXPECT_EQ(chat_ok(chat_body({{"logprobs", true}, {"top_logprobs", 5}})).params.logprobs, 5);
  EXPECT_EQ(chat_error(chat_body({{"top_logprobs", 2}})).param, "top_logprobs") << "needs logprobs: true";
  EXPECT_EQ(chat_error(chat_body({{"logprobs", true}, {"top_logprobs", 21}})).param, "top_logprobs");
  EXPECT_EQ(chat_error(chat_body({{"logprobs", "yes"}})).param, "logprobs");
  EXPECT_EQ(completion_ok({{"prompt", "x"}}).params.logprobs, -1);
  EXPECT_EQ(completion_ok({{"prompt", "x"}, {"logprobs", 3}}).params.logprobs, 3);
  EXPECT_EQ(completion_ok({{"prompt", "x"}, {"logprobs", 0}}).params.logprobs, 0);
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logprobs", -1}}).param, "logprobs");
}

TEST(ApiRequestParser, CompletionPromptForms) {
  auto text = completion_ok({{"prompt", "Once upon"}});
  EXPECT_EQ(std::get<std::string>(text.prompt), "Once upon");
  auto one = completion_ok({{"prompt", {"Once upon"}}});
  EXPECT_EQ(std::get<std::string>(one.prompt), "Once upon");
  auto ids = completion_ok({{"prompt", {1, 2, 3}}});
  EXPECT_EQ(std::get<TokenPrompt>(ids.prompt), (TokenPrompt{1, 2, 3}));
  auto nested = completion_ok({{"prompt", json::array({json::array({4, 5})})}});
  EXPECT_EQ(std::get<TokenPrompt>(nested.prompt), (TokenPrompt{4, 5}));
}

TEST(ApiRequestParser, CompletionPromptErrors) {
  EXPECT_EQ(completion_error(json::object()).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", ""}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", json::array()}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", {"a", "b"}}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", 12}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", {1, -2}}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", {1, 1000}}}).param, "prompt");  // vocab_size is 1000
  EXPECT_EQ(completion_error({{"prompt", {1, "a"}}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"model", "other"}}).status, 404);
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"max_tokens", -5}}).param, "max_tokens");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"echo", true}}).param, "echo");
}

TEST(ApiRequestParser, NestingDepthIsCountedOutsideStrings) {
  EXPECT_EQ(json_nesting_depth("{}"), 1u);
  EXPECT_EQ(json_nesting_depth(R"({"a": [[1], {"b": [2]}], "c": "[[[{{{"})"), 4u);
  EXPECT_EQ(json_nesting_depth(R"({"a": "\"[[[", "b": [[]]})"), 3u) << "an escaped quote does not end the string";
  EXPECT_EQ(json_nesting_depth(std::string(1000, '['), 10), 11u) << "counting stops past the limit";
}

TEST(ApiRequestParser, ValuesAreCountedExactlyBeforeParsing) {
  constexpr std::size_t kNoLimit = std::numeric_limits<std::size_t>::max();
  for (const std::string text : {R"({})", R"([])", R"({"a": 1})", R"([1, 2, 3])", R"({"a": {}, "b": [], "c": [{}]})",
                                 R"({"s": "a, b, [c], {d}", "e": "\", ", "t": [true, false, null, -1.5e3]})",
                                 R"( { "m" : [ { "role" : "user" , "content" : [ { "type" : "text" } ] } ] } )",
                                 R"([[[], [[]]], {"k": [{"x": [1, [2, {}]]}]}])"}) {
    EXPECT_EQ(json_shape(text, kMaxJsonDepth, kNoLimit).nodes, json_value_count(json::parse(text))) << text;
  }
  // A prefix of valid JSON counts what a parser builds before it meets the end.
  EXPECT_EQ(json_shape(R"([{}, {}, {})", kMaxJsonDepth, kNoLimit).nodes, 4u);
  EXPECT_EQ(json_shape("[" + std::string(1000, '1') + "]", kMaxJsonDepth, kNoLimit).nodes, 2u) << "one long number";
  std::string many = "[0";
  for (int i = 0; i < 999; ++i) many += ",0";
  EXPECT_EQ(json_shape(many + "]", kMaxJsonDepth, 100).nodes, 101u) << "counting stops past the limit";
}

TEST(ApiRequestParser, BodiesWithMoreValuesThanTheLimitAreRefusedWith413) {
  auto with_values = [](std::size_t extra) {
    std::string x = "[";
    for (std::size_t i = 0; i < extra; ++i) x += i == 0 ? "{}" : ",{}";
    return R"({"messages": [{"role": "user", "content": "hi"}], "x": )" + x + "]}";
  };
  // The root, messages, one message with two strings, x: 6 values besides x's elements.
  ParseOptions o = options();
  o.max_json_nodes = 100;
  EXPECT_TRUE(parse_chat_request(with_values(94), o).has_value());
  const ApiError over = chat_error(with_values(95), o);
  EXPECT_EQ(over.status, 413);
  EXPECT_EQ(over.code, "json_too_many_nodes");
  EXPECT_NE(over.message.find("100"), std::string::npos) << over.message;
  EXPECT_NE(over.message.find("--max-json-nodes"), std::string::npos) << over.message;
  EXPECT_EQ(parse_json_object(with_values(95), 100).error().code, "json_too_many_nodes");
  const auto completion = parse_completion_request(R"({"prompt": [1, 2, 3], "x": [1, 2, 3, 4, 5, 6, 7, 8, 9]})", [] {
    ParseOptions small = options();
    small.max_json_nodes = 14;  // the body holds 15
    return small;
  }());
  ASSERT_FALSE(completion.has_value());
  EXPECT_EQ(completion.error().code, "json_too_many_nodes");
  // The default takes a prompt of token ids that fills the context, however long the context.
  EXPECT_EQ(json_node_limit_for_context(16384), kDefaultMaxJsonNodes);
  EXPECT_EQ(json_node_limit_for_context(1u << 20), (1u << 20) + kJsonNodesBesideTokenPrompt);
}

TEST(ApiRequestParser, BodiesNestedDeeperThanTheLimitAreRefusedBeforeAnythingWalksThem) {
  const auto nest = [](std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  const auto kwargs_body = [&](std::size_t depth) {
    return R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"k": )" + nest(depth) + "}}";
  };
  // The root object and the kwargs object are two levels.
  EXPECT_TRUE(parse_chat_request(kwargs_body(kMaxJsonDepth - 2), options()).has_value());
  const ApiError deep = chat_error(kwargs_body(kMaxJsonDepth - 1));
  EXPECT_EQ(deep.status, 400);
  EXPECT_EQ(deep.code, "json_too_deep");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": "x", "extra": )" + nest(100'000) + "}]}").code,
            "json_too_deep");
  const auto completion = parse_completion_request(R"({"prompt": "x", "extra": )" + nest(100'000) + "}", options());
  ASSERT_FALSE(completion.has_value());
  EXPECT_EQ(completion.error().code, "json_too_deep");
  EXPECT_EQ(parse_json_object(nest(100'000), kDefaultMaxJsonNodes).error().code, "json_too_deep");
  // Brackets inside strings are text.
  EXPECT_TRUE(parse_chat_request(chat_body({{"stop", nest(100)}}).dump(), options()).has_value());
}

TEST(ApiRequestParser, ErrorJsonHasTheOpenAiShape) {
  const auto error = chat_error(chat_body({{"temperature", 9}}));
  const json body = error.to_json();
  ASSERT_TRUE(body.contains("error"));
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "temperature");
  EXPECT_TRUE(body["error"]["code"].is_null());
  EXPECT_TRUE(body["error"]["message"].is_string());
}

}  // namespace
}  // namespace prefixd::api
