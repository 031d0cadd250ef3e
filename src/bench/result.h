// prefixd bench — what one completion request reported, from the client's and the server's side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

// -1 marks a field the server did not send (or a time that was not measured).
struct CompletionResult {
  int status = 0;               // HTTP status; 0 when the request never got an answer
  std::string error;            // non-empty: the request failed (transport, HTTP status, error payload)
  bool cancelled = false;       // the client hung up mid-stream on purpose (not an error)
  double ttft_ms = -1;          // client: request sent → first SSE chunk with text or a finish reason
  double total_ms = -1;         // client: request sent → response complete
  // client: request sent → each chunk that carried a generated piece (several chunks that arrive
  // in one read share its time)
  std::vector<double> piece_ms;
  std::string text;             // the generated text, concatenated
  std::string finish_reason;
  // The reply's tool calls (OpenAI shape: id, type, function {name, arguments}), their streamed
  // pieces joined; an empty array when it made none.
  nlohmann::json tool_calls = nlohmann::json::array();
  // usage
  std::int64_t prompt_tokens = -1;
  std::int64_t completion_tokens = -1;
  std::int64_t cached_tokens = -1;  // usage.prompt_tokens_details.cached_tokens
  // prompt_cache
  std::string outcome;
  std::int64_t cache_cached_tokens = -1;
  std::int64_t fed_tokens = -1;
  std::string tier;
  std::string scope;
  // timings (server side)
  double queued_ms = -1;
  std::int64_t prompt_n = -1;
  double prompt_ms = -1;
  std::int64_t predicted_n = -1;
  double predicted_ms = -1;
  std::int64_t cache_n = -1;    // timings.cache_n: llama-server's count of prompt tokens reused
  // The first generated token as streamed: its text, and its top_logprobs when the request asked
  // for logprobs (null otherwise), for comparing a warm first token with a cold one.
  std::string first_piece;
  nlohmann::json first_logprobs;

  bool ok() const { return error.empty(); }
  nlohmann::json to_json() const;
};

// Copies usage, prompt_cache and timings from a response body or a final stream chunk; absent
// fields stay as they are (an include_usage chunk carries usage alone).
void read_report_fields(const nlohmann::json& body, CompletionResult& out);

// The message of an OpenAI-style {"error": {...}} body, or the raw text when it is not one.
std::string error_message(const std::string& body);

}  // namespace prefixd::bench
