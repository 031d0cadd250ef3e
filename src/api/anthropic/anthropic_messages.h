// prefixd api — Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) as an
// adapter: a body parses into the ChatRequest every chat endpoint builds its prompt from (the
// conversation in the shape chat templates read: system, user, assistant with tool_calls, tool),
// and replies render from the same generated text and parsed tool calls. The same conversation
// sent as a chat completion and as a message therefore renders the same tokens and shares cache
// entries.
//
// Mapping (request):
//   system (string or text blocks)      -> a system message first
//   user text blocks                    -> a user message (blocks joined by "\n")
//   user tool_result blocks             -> tool messages (tool_call_id = tool_use_id), before the
//                                          user message holding the blocks that follow them
//   assistant text / tool_use blocks    -> one assistant message: content and tool_calls, the
//                                          call's arguments the compact JSON of `input`, keys in
//                                          the order sent
//   assistant thinking blocks           -> reasoning_content, which reasoning templates render
//   tools [{name, description, input_schema}] -> function tools; tool_choice auto / any / tool /
//                                          none -> auto / required / the function / none
//   stop_sequences, temperature, top_p, top_k, max_tokens (required), metadata.user_id (the
//   cache session), thinking {type: enabled|disabled} (the template's enable_thinking)
// Image blocks in user messages (base64 sources) become the request's images (images/image_input.h).
// What cannot be served is a 400 naming the field: URL image sources, document blocks, server
// tools, a final assistant message (a prefill of the reply).
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/errors.h"
#include "api/openai/request_parser.h"
#include "api/openai/responses.h"
#include "api/tools/tool_calls.h"
#include "scheduler/request.h"

namespace prefixd::api {

// A cache_control breakpoint: the prompt's prefix up to the end of the first `messages` messages
// of the chat, to be kept for `ttl` (5 minutes unless the breakpoint says "1h").
struct CacheBreakpoint {
  std::size_t messages = 0;
  std::chrono::seconds ttl{300};
};

struct MessagesRequest {
  ChatRequest chat;
  // How many of chat.chat.messages end at or before the last cache_control breakpoint (a system
  // prompt's or tool's breakpoint: the system message, or 0 without one); nullopt: no breakpoint.
  std::optional<std::size_t> breakpoint_messages;
  // For each TTL the request's breakpoints name, the last breakpoint with it (the cache keeps
  // those prefixes ahead of LRU for that long: cache/retention.h). A tools breakpoint counts as
  // the system message's.
  std::vector<CacheBreakpoint> retained;
};

enum class MessagesRoute { create, count_tokens };

std::expected<MessagesRequest, ApiError> parse_messages_request(std::string_view body, const ParseOptions& options,
                                                                MessagesRoute route);

// {"type": "error", "error": {"type", "message"}}, the error types Anthropic's SDKs map to their
// exception classes (invalid_request_error, authentication_error, permission_error,
// not_found_error, request_too_large, api_error, overloaded_error).
nlohmann::ordered_json anthropic_error_json(const ApiError& error);

// Usage in Anthropic's terms, from the cache's own counts: cache_read_input_tokens were reused,
// cache_creation_input_tokens were computed (and cached) up to the last breakpoint, input_tokens
// were computed after it; the three add up to the prompt.
struct MessagesUsage {
  std::int32_t input_tokens = 0;
  std::int32_t cache_read_input_tokens = 0;
  std::int32_t cache_creation_input_tokens = 0;
  std::int32_t output_tokens = 0;
};
MessagesUsage messages_usage(const scheduler::Usage& usage, std::optional<std::int32_t> breakpoint_tokens);
nlohmann::ordered_json messages_usage_json(const MessagesUsage& usage);

// "end_turn", "max_tokens", "stop_sequence" or "tool_use".
const char* messages_stop_reason(const scheduler::StreamEvent& done, bool called_tools);

// The body of a non-streamed reply: content blocks (text, then tool_use in call order), stop
// reason and usage, with prefixd's prompt_cache and timings beside them.
nlohmann::ordered_json messages_body(const ResponseMeta& meta, const ParsedAssistant& reply,
                                     const scheduler::StreamEvent& done, const MessagesUsage& usage);

// A tool_use block's `input`: the call's arguments object, keys in the order generated.
nlohmann::ordered_json tool_use_input(const ToolCall& call);

}  // namespace prefixd::api
