// prefixd bench — the requests every server gets, and what is read back from them.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/result.h"

namespace prefixd::bench {

struct RequestOptions {
  int max_tokens = 1;
  std::string session;       // prompt_cache_key and user; empty: neither is sent
  bool cache_prompt = true;  // false: both servers evaluate the whole prompt and keep nothing
  int top_logprobs = 0;      // > 0: ask for the first tokens' top logprobs
  nlohmann::json tools;      // non-null: sent as the chat request's `tools`
};

// The body of a /v1/chat/completions request, identical for both servers: greedy, streamed with
// a usage chunk, cache fields both understand (llama-server ignores prompt_cache_key and user).
nlohmann::json chat_body(const nlohmann::json& messages, const RequestOptions& options);
// The same for a raw prompt on /v1/completions.
nlohmann::json completion_body(const std::string& prompt, const RequestOptions& options);

// Where a workload step goes and what it sends: /v1/completions for a raw prompt, else chat.
struct Step;
const char* step_path(const Step& step);
nlohmann::json step_body(const Step& step, const RequestOptions& options);

// Prompt tokens the server ran through the model, from its own counters: timings.prompt_n (both
// servers), else prefixd's prompt_cache.fed_tokens; -1 when neither was reported.
std::int64_t evaluated_tokens(const CompletionResult& r);
// Prompt tokens taken from a cache: usage.prompt_tokens_details.cached_tokens, else
// timings.cache_n, else prompt − evaluated; -1 when unknown.
std::int64_t cached_tokens(const CompletionResult& r);

// The record of one request in the results file.
nlohmann::json request_record(int step, const std::string& arm, double start_s, const CompletionResult& r);

}  // namespace prefixd::bench
