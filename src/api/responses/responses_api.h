// prefixd api — OpenAI's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}) as
// an adapter over the chat request every endpoint builds its prompt from.
//
// Mapping (request):
//   instructions                        -> a system message first (not carried over from a
//                                          previous response, as OpenAI specifies)
//   input: a string                     -> one user message
//   input items: message (role system / developer / user / assistant, content a string or
//     input_text / output_text parts)   -> that message
//   function_call {call_id, name, arguments} -> a tool call of an assistant message (consecutive
//                                          calls, and the assistant text before them, share one)
//   function_call_output {call_id, output}   -> a tool message
//   reasoning items                     -> skipped (nothing a template renders)
//   tools [{type: function, name, description, parameters}], tool_choice, parallel_tool_calls,
//   text.format (text, json_object, json_schema), max_output_tokens, temperature, top_p,
//   prompt_cache_key / user (the cache session), store, previous_response_id, metadata
// What cannot be served is a 400 naming the field: built-in tools (web_search, file_search, ...),
// image and file parts, background mode.
#pragma once

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

struct ResponsesRequest {
  // chat.chat.messages holds the input items alone: the conversation is `instructions` (as a
  // system message), the previous response's conversation, then these (conversation_of).
  ChatRequest chat;
  std::optional<std::string> instructions;
  std::optional<std::string> previous_response_id;
  bool store = true;
  // Echoed in the response object as sent.
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  nlohmann::ordered_json tool_choice = "auto";
  nlohmann::ordered_json text_format = {{"type", "text"}};
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
};

std::expected<ResponsesRequest, ApiError> parse_responses_request(std::string_view body, const ParseOptions& options);

// The messages a request renders: its instructions, then `history` (a previous response's
// conversation, instructions excluded), then its input items.
nlohmann::ordered_json conversation_of(const ResponsesRequest& request, const nlohmann::ordered_json& history);

// The assistant message a reply becomes in the conversation (its text, and its calls with the
// arguments exactly as generated): what a continuation by previous_response_id renders, and what
// the client sends back when it resends the whole input.
nlohmann::ordered_json reply_message(const ParsedAssistant& reply);

// The output items of a reply: a message with one output_text part (when there is text), then a
// function_call per call. Item ids are derived from the response id.
nlohmann::ordered_json response_output(const std::string& response_id, const ParsedAssistant& reply);

// "completed", or "incomplete" when the reply ran into max_output_tokens.
const char* response_status(const scheduler::StreamEvent& done);

// The response object: `output` as response_output writes it, usage with
// input_tokens_details.cached_tokens, and prefixd's prompt_cache and timings.
nlohmann::ordered_json response_object(const ResponseMeta& meta, const ResponsesRequest& request,
                                       nlohmann::ordered_json output, const scheduler::StreamEvent& done);

// The object of a response that has not finished yet (streaming's response.created).
nlohmann::ordered_json response_in_progress(const ResponseMeta& meta, const ResponsesRequest& request);

}  // namespace prefixd::api
