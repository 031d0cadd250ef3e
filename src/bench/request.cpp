#include "bench/request.h"

#include <cmath>

#include "bench/workload.h"

namespace prefixd::bench {

namespace {

// What a chat and a text completion request share: greedy, streamed with a usage chunk, and the
// cache fields both servers understand (llama-server ignores prompt_cache_key and user).
nlohmann::json common_body(const RequestOptions& o) {
  nlohmann::json body = {{"max_tokens", o.max_tokens},
                         {"temperature", 0},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}},
                         {"cache_prompt", o.cache_prompt}};
  if (!o.session.empty()) {
    body["prompt_cache_key"] = o.session;
    body["user"] = o.session;
  }
  if (o.top_logprobs > 0) {
    body["logprobs"] = true;
    body["top_logprobs"] = o.top_logprobs;
  }
  return body;
}

}  // namespace

nlohmann::json chat_body(const nlohmann::json& messages, const RequestOptions& o) {
  nlohmann::json body = common_body(o);
  body["messages"] = messages;
  if (!o.tools.is_null()) body["tools"] = o.tools;
  return body;
}

nlohmann::json completion_body(const std::string& prompt, const RequestOptions& o) {
  // Legacy completions take an integer top-logprob count and no `logprobs: true`.
  nlohmann::json body = common_body(RequestOptions{o.max_tokens, o.session, o.cache_prompt, 0});
  body["prompt"] = prompt;
  if (o.top_logprobs > 0) body["logprobs"] = o.top_logprobs;
  return body;
}

const char* step_path(const Step& step) {
  if (!step.infill.is_null()) return "/infill";
  return step.prompt.empty() ? "/v1/chat/completions" : "/v1/completions";
}

nlohmann::json step_body(const Step& step, const RequestOptions& options) {
  if (!step.infill.is_null()) {
    // llama-server's native fields: greedy, streamed, n_predict for max_tokens.
    nlohmann::json body = step.infill;
    body["n_predict"] = options.max_tokens;
    body["temperature"] = 0;
    body["stream"] = true;
    body["cache_prompt"] = options.cache_prompt;
    return body;
  }
  if (!step.prompt.empty()) {
    nlohmann::json body = completion_body(step.prompt, options);
    if (step.body_fields.is_object()) body.update(step.body_fields);
    return body;
  }
  RequestOptions with_tools = options;
  if (with_tools.tools.is_null()) with_tools.tools = step.tools;
  nlohmann::json body = chat_body(step.messages, with_tools);
  if (step.body_fields.is_object()) body.update(step.body_fields);
  return body;
}

std::int64_t evaluated_tokens(const CompletionResult& r) {
  if (r.prompt_n >= 0) return r.prompt_n;
  return r.fed_tokens;
}

std::int64_t cached_tokens(const CompletionResult& r) {
  if (r.cached_tokens >= 0) return r.cached_tokens;
  if (r.cache_n >= 0) return r.cache_n;
  const std::int64_t evaluated = evaluated_tokens(r);
  if (r.prompt_tokens >= 0 && evaluated >= 0) return r.prompt_tokens - evaluated;
  return -1;
}

nlohmann::json request_record(int step, const std::string& arm, double start_s, const CompletionResult& r) {
  nlohmann::json j = {{"step", step},
                      {"arm", arm},
                      {"start_s", start_s},
                      {"ttft_ms", r.ttft_ms},
                      {"total_ms", r.total_ms},
                      {"prompt_tokens", r.prompt_tokens},
                      {"evaluated", evaluated_tokens(r)},
                      {"cached", cached_tokens(r)},
                      {"completion_tokens", r.completion_tokens},
                      {"first_piece", r.first_piece},
                      {"text", r.text},
                      {"finish_reason", r.finish_reason},
                      {"server_prompt_ms", r.prompt_ms},
                      {"server_queued_ms", r.queued_ms}};
  if (r.piece_ms.size() >= 2) {
    // Inter-token latency as the client saw it: the gaps between consecutive pieces, 0.01 ms.
    nlohmann::json gaps = nlohmann::json::array();
    for (std::size_t k = 1; k < r.piece_ms.size(); ++k) {
      gaps.push_back(std::round((r.piece_ms[k] - r.piece_ms[k - 1]) * 100.0) / 100.0);
    }
    j["itl_ms"] = std::move(gaps);
  }
  if (r.cancelled) j["cancelled"] = true;
  if (!r.outcome.empty()) j["outcome"] = r.outcome;
  if (r.fed_tokens >= 0) j["fed_tokens"] = r.fed_tokens;
  if (!r.tier.empty()) j["tier"] = r.tier;
  if (!r.tool_calls.empty()) j["tool_calls"] = r.tool_calls;
  if (!r.ok()) j["error"] = r.error;
  return j;
}

}  // namespace prefixd::bench
