// prefixd api — llama-server's native completion API, POST /completion (and /infill): a raw prompt (text or
// token ids) with llama.cpp's field names in, llama-server's body out (`content`, `tokens`, `stop`,
// `stop_type`, `tokens_predicted`, `tokens_evaluated`, `tokens_cached`, `timings`,
// `completion_probabilities` with `n_probs`), or its stream: one `data:` object per piece of text
// and a last one with `stop: true`, without OpenAI's [DONE]. prefixd adds `prompt_cache`.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/chat/chat_service.h"
#include "api/output.h"
#include "api/route_support.h"
#include "api/stream_relay.h"
#include "http/server.h"
#include "scheduler/request.h"

namespace prefixd::api {

http::Response serve_native_completion(ChatService& chats, const RouteContext& route, http::Request& req);
// POST /infill: the native fields, the text around the cursor and other files' chunks, laid out
// as a fill-in-the-middle prompt (infill_prompt.h); the same body and stream as /completion. A
// model without fill-in-the-middle tokens is a 400 that says so.
http::Response serve_infill(ChatService& chats, const RouteContext& route, http::Request& req);

// What the native body and stream repeat of the request.
struct NativeReplyOptions {
  std::int32_t n_probs = 0;
  bool return_tokens = false;
  std::int32_t id_slot = -1;
  std::vector<std::string> response_fields;  // NativeCompletionRequest's
};

// llama-server's response_fields: each path ("timings/prompt_n") that `body` has, under its last
// key; paths it lacks are left out.
nlohmann::ordered_json select_fields(const nlohmann::ordered_json& body, std::span<const std::string> paths);

// The body of a reply collected whole (exposed for tests).
nlohmann::ordered_json native_completion_body(const ResponseMeta& meta, const NativeReplyOptions& options,
                                              std::string_view content, const scheduler::StreamEvent& done,
                                              std::span<const scheduler::GeneratedLogprobs> tokens);
// The stop_type llama-server reports: "eos", "word" (a stop string), "limit" (n_predict or the
// context) or "none" (cancelled, failed).
const char* native_stop_type(const scheduler::StreamEvent& done);

std::unique_ptr<StreamFormat> native_stream_format(ResponseMeta meta, NativeReplyOptions options);

}  // namespace prefixd::api
