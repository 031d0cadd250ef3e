// prefixd compare — the chat requests both servers get, and what is read back from them.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/result.h"

namespace prefixd::compare {

struct RequestOptions {
  int max_tokens = 1;
  std::string session;       // prompt_cache_key and user; empty: neither is sent
  bool cache_prompt = true;  // false: both servers evaluate the whole prompt and keep nothing
  int top_logprobs = 0;      // > 0: ask for the first tokens' top logprobs
};

// The body of a /v1/chat/completions request, identical for both servers: greedy, streamed with
// a usage chunk, cache fields both understand (llama-server ignores prompt_cache_key and user).
nlohmann::json chat_body(const nlohmann::json& messages, const RequestOptions& options);

// Prompt tokens the server ran through the model, from its own counters: timings.prompt_n (both
// servers), else prefixd's prompt_cache.fed_tokens; -1 when neither was reported.
std::int64_t evaluated_tokens(const bench::CompletionResult& r);
// Prompt tokens taken from a cache: usage.prompt_tokens_details.cached_tokens, else
// timings.cache_n, else prompt − evaluated; -1 when unknown.
std::int64_t cached_tokens(const bench::CompletionResult& r);

// The record of one request in the results file.
nlohmann::json request_record(int step, const std::string& arm, double start_s, const bench::CompletionResult& r);

}  // namespace prefixd::compare
