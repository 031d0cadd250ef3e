// prefixd api — JSON request bodies in, validated requests (or the ApiError to answer) out.
//
// Pure functions: no model, no scheduler, no I/O, so every rejection rule is unit-testable.
// Tokenizing and the prompt-length check happen later (prompt_builder.h), where the vocabulary is.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/chat_template.h"
#include "api/errors.h"
#include "api/json_bounds.h"
#include "engine/types.h"
#include "scheduler/request.h"

namespace prefixd::api {

struct ParseOptions {
  std::vector<std::string> model_names;  // accepted values of `model` (served id, alias)
  bool cache_prompt_default = true;      // false: the server runs with --no-cache-prompt
  std::int32_t vocab_size = 0;           // token ids in a prompt must be below this; 0: unchecked
  // The seed of a request that sends none (--seed); kRandomSeed: a random one per request.
  std::uint32_t default_seed = engine::kRandomSeed;
  std::size_t max_json_nodes = kDefaultMaxJsonNodes;  // values a body may hold (--max-json-nodes)
};

// Limits that are part of the API contract.
inline constexpr std::size_t kMaxStopStrings = 16;
inline constexpr std::size_t kMaxStopStringBytes = 1024;

struct CacheFields {
  bool enabled = true;       // cache_prompt (root or extra_body) && the server default
  std::string session_key;   // prompt_cache_key > user > ""
  // cache_salt: requests with different salts never share K/V (within the caller's tenant, whose id
  // is a namespace field of its own). nullopt when absent; never empty.
  std::optional<std::string> salt;
};

// What /v1/chat/completions and /v1/completions have in common.
struct CommonParams {
  engine::SamplingParams sampling;
  std::int32_t max_tokens = -1;    // -1: until end of generation or the context is full
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage: an extra usage-only chunk
  std::int32_t logprobs = -1;      // -1: none; else alternatives per token (see GenerationRequest)
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
  nlohmann::json tools;         // as requested (null when absent), for the template signature
  nlohmann::json tool_choice;   // effective: as requested, else "auto" with tools, "none" without
  OutputFormat response_format;
  bool parallel_tool_calls = true;  // a reply may hold several calls
  // The tools with their keys in the order sent, when a grammar is built from their schemas
  // (tool_choice "required" or a named function); null otherwise.
  nlohmann::ordered_json ordered_tools;
};

using TokenPrompt = std::vector<engine::Token>;

struct CompletionRequest {
  CommonParams params;
  std::variant<std::string, TokenPrompt> prompt;  // text to tokenize, or token ids used as is
};

// The body parsed, or why not: nested deeper than kMaxJsonDepth or holding more than `max_nodes`
// values (refused before parsing: json_bounds.h), malformed, or not an object. Every request body
// the server parses goes through here.
std::expected<nlohmann::json, ApiError> parse_json_object(std::string_view body, std::size_t max_nodes);

std::expected<ChatRequest, ApiError> parse_chat_request(std::string_view body, const ParseOptions& options);
std::expected<CompletionRequest, ApiError> parse_completion_request(std::string_view body,
                                                                    const ParseOptions& options);

}  // namespace prefixd::api
