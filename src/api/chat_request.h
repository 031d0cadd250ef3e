// prefixd api — the one internal request every wire protocol parses into: a conversation (messages,
// tools, tool choice, output format) with its sampling, stop and cache fields. The OpenAI chat and
// completions parsers, the Responses adapter and the Messages adapter each build one of these; the
// prompt builder, the scheduler request and the reply renderers read nothing else, which is why the
// same conversation sent through any protocol renders the same tokens and meets the same cache.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/images/image_input.h"
#include "api/prompt/chat_template.h"
#include "engine/types.h"
#include "scheduler/request.h"

namespace prefixd::api {

// Limits that are part of the API contract.
inline constexpr std::size_t kMaxStopStrings = 16;
inline constexpr std::size_t kMaxStopStringBytes = 1024;

struct CacheFields {
  bool enabled = true;       // cache_prompt (root or extra_body) && the server default
  std::string session_key;   // prompt_cache_key > user > ""
  // cache_salt: requests with different salts never share K/V (within the caller's tenant, whose id
  // is a namespace field of its own). nullopt when absent; never empty.
  std::optional<std::string> salt;
  std::int32_t shift_reuse_min = -1;  // n_cache_reuse; -1: the server's --cache-reuse
  // `lora` (llama-server's [{id, scale}]): the LoRA adapters for this request alone, ids unchecked
  // (AdapterTable::resolve); nullopt or empty: the server's scales. A namespace field, as the
  // salt is: it changes every K/V the request computes.
  std::optional<std::vector<engine::AdapterScale>> lora;
};

// What /v1/chat/completions and /v1/completions have in common.
struct CommonParams {
  engine::SamplingParams sampling;
  std::int32_t max_tokens = -1;    // -1: until end of generation or the context is full
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage: an extra usage-only chunk
  bool return_progress = false;    // a stream also carries prompt-processing progress
  std::int32_t logprobs = -1;      // -1: none; else alternatives per token (see GenerationRequest)
  scheduler::DraftSettings speculative;  // speculative.n_max / n_min (read_speculative)
  std::chrono::milliseconds time_limit_after_newline{0};  // t_max_predict_ms (GenerationRequest's)
  std::int32_t indent_floor = 0;                          // n_indent (GenerationRequest's)
  CacheFields cache;
};

// What the reply must be (response_format): free text, any JSON object, or JSON valid against a
// schema (kept with its key order).
struct OutputFormat {
  enum class Kind { text, json_object, json_schema };
  Kind kind = Kind::text;
  nlohmann::ordered_json schema;  // json_schema only
};

struct ChatRequest {
  CommonParams params;
  ChatInput chat;               // messages with text parts flattened, tools (none when tool_choice is "none")
  // As requested (null when absent), keys in the order sent: what the template renders, a grammar
  // for a forced call follows (a schema's property order is the order of the call's keys) and the
  // template signature digests.
  nlohmann::ordered_json tools;
  nlohmann::ordered_json tool_choice;  // effective: as requested, else "auto" with tools, "none" without
  OutputFormat response_format;
  bool parallel_tool_calls = true;  // a reply may hold several calls
  // The images, in the order their kImageMarker stands in the messages' text (image_input.h).
  std::vector<ImageInput> images;
};

using TokenPrompt = std::vector<engine::Token>;

struct CompletionRequest {
  CommonParams params;
  std::variant<std::string, TokenPrompt> prompt;  // text to tokenize, or token ids used as is
};

}  // namespace prefixd::api
