// Fuzz target: the request parser and validator (api/request_parser.h), which every JSON body of
// every route goes through before anything else sees it.
//
// Each input is one request body, parsed as a chat, as a completion request, as an Anthropic
// Messages request (api/anthropic_messages.h, both routes) and as a Responses API request
// (api/responses_api.h), by a server with
// the cache on and no vocabulary limit and by one with --no-cache-prompt, a 258-token vocabulary
// and a limit of 64 JSON values. Besides the sanitizers (and any exception escaping, which the
// server would answer with a 500), it checks the parser's promises: a refusal is a 4xx with a
// message whose JSON body can be written; an accepted body holds exactly as many values as the
// scan before parsing counted, within the limits; an accepted request holds only values inside
// the documented ranges.
#include <cstdint>
#include <string>
#include <string_view>

#include "api/anthropic/anthropic_messages.h"
#include "api/openai/request_parser.h"
#include "api/responses/responses_api.h"
#include "fuzz_check.h"

namespace prefixd::fuzz {
namespace {

using api::ApiError;
using api::CommonParams;
using api::ParseOptions;

void check_refusal(const ApiError& error) {
  require(error.status >= 400 && error.status < 500, "a bad request is answered with a 4xx");
  require(!error.message.empty(), "a refusal says why");
  // The HTTP layer writes this body with nlohmann's strict UTF-8 check; a throw would be a 500.
  require(!error.to_json().dump().empty(), "the error body can be written");
}

void check_common(const CommonParams& p, const ParseOptions& options) {
  const auto& s = p.sampling;
  require(s.top_p > 0.0f && s.top_p <= 1.0f, "top_p in (0, 1]");
  require(s.min_p >= 0.0f && s.min_p <= 1.0f, "min_p in [0, 1]");
  require(s.temperature >= 0.0f && s.temperature <= 2.0f, "temperature in [0, 2]");
  require(s.top_k >= 0, "top_k not negative");
  require(p.max_tokens == -1 || p.max_tokens >= 1, "max_tokens is -1 or at least 1");
  require(p.stop.size() <= api::kMaxStopStrings, "at most kMaxStopStrings stop strings");
  for (const auto& stop : p.stop) require(!stop.empty() && stop.size() <= api::kMaxStopStringBytes, "stop strings in bounds");
  require(p.logprobs >= -1 && p.logprobs <= scheduler::kMaxTopLogprobs, "logprobs in [-1, 20]");
  require(options.cache_prompt_default || !p.cache.enabled, "--no-cache-prompt wins over the request");
}

// Everything after the parser walks values recursively, and its memory grows with the values: an
// accepted body is within both bounds, and the scan that enforced them counted at least what was
// built.
void check_bounds(std::string_view body, const nlohmann::ordered_json& root, std::size_t max_nodes) {
  const api::JsonShape shape = api::json_shape(body, api::kMaxJsonDepth, max_nodes);
  require(shape.depth <= api::kMaxJsonDepth, "an accepted body nests within kMaxJsonDepth");
  require(shape.nodes <= max_nodes, "an accepted body holds at most max_json_nodes values");
  // A key given twice keeps its last value in the parsed tree while the scan counts both, so the
  // scan bounds what is built from above: equal when every key is unique.
  require(shape.nodes >= api::json_value_count(root), "the scan counts at least the values the parser builds");
}

void check_chat(std::string_view body, const ParseOptions& options) {
  const auto parsed = api::parse_chat_request(body, options);
  if (!parsed) return check_refusal(parsed.error());
  check_common(parsed->params, options);
  const auto& messages = parsed->chat.messages;
  require(messages.is_array() && !messages.empty(), "a chat has messages");
  for (const auto& m : messages) {
    require(m.is_object() && m.contains("role") && m["role"].is_string() && !m["role"].get<std::string>().empty(),
            "every message has a role");
    require(m["role"] != "developer", "developer is sent to templates as system");
    require(m.contains("content") && (m["content"].is_string() || m["content"].is_null()), "content is text or null");
  }
  const auto& choice = parsed->tool_choice;
  require(choice.is_object() || choice == "none" || choice == "auto" || choice == "required", "a known tool_choice");
  require(choice == "none" ? parsed->chat.tools.is_null() : parsed->chat.tools == parsed->tools,
          "the template sees the tools unless tool_choice is none");
  require(parsed->chat.extra_context.is_null() || parsed->chat.extra_context.is_object(), "kwargs are an object");
}

void check_completion(std::string_view body, const ParseOptions& options) {
  const auto parsed = api::parse_completion_request(body, options);
  if (!parsed) return check_refusal(parsed.error());
  check_common(parsed->params, options);
  if (const auto* text = std::get_if<std::string>(&parsed->prompt)) {
    require(!text->empty(), "a text prompt is not empty");
  } else {
    const auto& tokens = std::get<api::TokenPrompt>(parsed->prompt);
    require(!tokens.empty(), "a token prompt is not empty");
    for (const auto t : tokens) require(t >= 0 && (options.vocab_size == 0 || t < options.vocab_size), "token ids in the vocabulary");
  }
}

// The Messages adapter hands the template the same shapes a chat does: known roles, text or null
// content, tool results naming their call, calls whose arguments are JSON objects.
void check_messages(std::string_view body, const ParseOptions& options, api::MessagesRoute route) {
  const auto parsed = api::parse_messages_request(body, options, route);
  if (!parsed) {
    check_refusal(parsed.error());
    require(!api::anthropic_error_json(parsed.error()).dump().empty(), "the Anthropic error body can be written");
    return;
  }
  const api::ChatRequest& chat = parsed->chat;
  check_common(chat.params, options);
  require(chat.params.sampling.temperature <= 1.0f, "Anthropic's temperature is in [0, 1]");
  require(route == api::MessagesRoute::count_tokens || chat.params.max_tokens >= 1, "max_tokens is required");
  const auto& messages = chat.chat.messages;
  require(messages.is_array() && !messages.empty(), "a conversation has messages");
  require(!parsed->breakpoint_messages || *parsed->breakpoint_messages <= messages.size(), "a breakpoint ends inside the conversation");
  for (const auto& m : messages) {
    const std::string role = m.value("role", "");
    require(role == "system" || role == "user" || role == "assistant" || role == "tool", "a role templates know");
    require(m.contains("content") && (m["content"].is_string() || m["content"].is_null()), "content is text or null");
    if (role == "tool") require(m.contains("tool_call_id") && m["tool_call_id"].is_string(), "a tool result names its call");
    if (m.contains("tool_calls")) {
      for (const auto& call : m["tool_calls"]) {
        const auto arguments = nlohmann::json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
        require(arguments.is_object(), "a call's arguments are a JSON object");
      }
    }
  }
  require(messages.back()["role"] != "assistant", "a final assistant message is refused");
  const auto& choice = chat.tool_choice;
  require(choice.is_object() || choice == "none" || choice == "auto" || choice == "required", "a known tool_choice");
}

// The Responses adapter too: known roles, text or null content, tool results naming their call,
// and the conversation it renders puts the instructions first.
void check_responses(std::string_view body, const ParseOptions& options) {
  const auto parsed = api::parse_responses_request(body, options);
  if (!parsed) return check_refusal(parsed.error());
  const api::ChatRequest& chat = parsed->chat;
  check_common(chat.params, options);
  require(!chat.chat.messages.empty(), "a request has input");
  for (const auto& m : chat.chat.messages) {
    const std::string role = m.value("role", "");
    require(role == "system" || role == "user" || role == "assistant" || role == "tool", "a role templates know");
    require(m.contains("content") && (m["content"].is_string() || m["content"].is_null()), "content is text or null");
    if (role == "tool") require(m.contains("tool_call_id") && m["tool_call_id"].is_string(), "an output names its call");
  }
  const nlohmann::ordered_json conversation = api::conversation_of(*parsed, nlohmann::ordered_json::array());
  require(conversation.size() == chat.chat.messages.size() + (parsed->instructions ? 1 : 0), "instructions add one message");
  const auto& choice = chat.tool_choice;
  require(choice.is_object() || choice == "none" || choice == "auto" || choice == "required", "a known tool_choice");
}

}  // namespace
}  // namespace prefixd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using prefixd::api::ParseOptions;
  static const ParseOptions kServers[] = {
      {.model_names = {"default", "tiny"}, .cache_prompt_default = true, .vocab_size = 0},
      {.model_names = {"default"}, .cache_prompt_default = false, .vocab_size = 258, .max_json_nodes = 64},
  };
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const ParseOptions& options : kServers) {
    if (const auto root = prefixd::api::parse_json_object(body, options.max_json_nodes); root) {
      prefixd::fuzz::check_bounds(body, *root, options.max_json_nodes);
    } else {
      prefixd::fuzz::check_refusal(root.error());
    }
    prefixd::fuzz::check_chat(body, options);
    prefixd::fuzz::check_completion(body, options);
    prefixd::fuzz::check_messages(body, options, prefixd::api::MessagesRoute::create);
    prefixd::fuzz::check_messages(body, options, prefixd::api::MessagesRoute::count_tokens);
    prefixd::fuzz::check_responses(body, options);
  }
  return 0;
}
