// prefixd api — the JSON bodies and SSE frames the server sends, in OpenAI's shapes.
//
// Every completion (streamed or not) carries `usage`, plus two prefixd extensions: `prompt_cache`
// (what the prompt cache did) and `timings` (prefill and decode speed, for benchmarks).
#pragma once

#include "api/tools/tool_call_stream.h"
#include "api/tools/tool_calls.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/output.h"
#include "engine/types.h"
#include "scheduler/request.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

// choices[].logprobs for the tokens of one body or chunk: null when the request did not ask for
// them; chat: {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}; legacy
// completions: {tokens, token_logprobs, top_logprobs, text_offset}, where `text_offset` counts
// bytes of generated text before each token and carries on across chunks through `offset`.
OrderedJson logprobs_json(const ResponseMeta& meta, std::span<const scheduler::GeneratedLogprobs> tokens,
                          std::size_t& offset);

// "stop" / "length"; a cancelled request reports "stop" (its client is gone or the server is
// stopping) and an error "error".
const char* finish_reason_text(scheduler::FinishReason reason);

OrderedJson usage_json(const scheduler::Usage& usage);
OrderedJson prompt_cache_json(const scheduler::CacheReport& report);
OrderedJson timings_json(const scheduler::StreamEvent& done);

// The body of a non-streaming response: all of the text and the `done` event that ended it.
// `reasoning` (a chat whose template reasons, reasoning.h): the message's reasoning_content.
OrderedJson completion_body(const ResponseMeta& meta, std::string_view text, const scheduler::StreamEvent& done,
                            std::span<const scheduler::GeneratedLogprobs> logprobs = {}, std::string_view reasoning = {});
// A chat body whose text was parsed into content and tool calls (tool_calls.h): the message has
// `tool_calls` and `content` null when it was only calls; finish_reason "tool_calls" when the model
// ended its turn after calling.
OrderedJson tool_call_body(const ResponseMeta& meta, const ParsedAssistant& parsed, const scheduler::StreamEvent& done,
                           std::span<const scheduler::GeneratedLogprobs> logprobs = {});
// finish_reason for a reply that called tools: "tool_calls" unless it was cut off by length, an
// error or a cancellation.
const char* tool_call_finish_reason(scheduler::FinishReason reason);

// Streaming chunks. A chat stream opens with role_chunk; every chunk but the usage chunk has one
// choice; the finish chunk carries finish_reason, usage, prompt_cache and timings; the usage chunk
// (stream_options.include_usage) has no choices, as OpenAI sends it.
OrderedJson role_chunk(const ResponseMeta& meta);
// A piece of a chat reply's reasoning: delta.reasoning_content.
OrderedJson reasoning_chunk(const ResponseMeta& meta, std::string_view text);
OrderedJson text_chunk(const ResponseMeta& meta, std::string_view text,
                       std::span<const scheduler::GeneratedLogprobs> logprobs, std::size_t& offset);
inline OrderedJson text_chunk(const ResponseMeta& meta, std::string_view text) {
  std::size_t offset = 0;
  return text_chunk(meta, text, {}, offset);
}
// `finish_reason`: nullptr for the scheduler's own (finish_reason_text).
OrderedJson finish_chunk(const ResponseMeta& meta, const scheduler::StreamEvent& done, const char* finish_reason = nullptr);
// A chunk with one tool-call delta (choices[0].delta.tool_calls[0]).
OrderedJson tool_call_chunk(const ResponseMeta& meta, const ToolCallDelta& delta,
                            std::span<const scheduler::GeneratedLogprobs> logprobs, std::size_t& offset);
OrderedJson usage_chunk(const ResponseMeta& meta, const scheduler::StreamEvent& done);
// A chunk that adds nothing to the reply (an empty delta, or an empty text for completions): what
// a stream sends while the prompt is prefilled, since clients count chunks, not SSE comments, as
// signs of life.
OrderedJson activity_chunk(const ResponseMeta& meta);
// A prompt-processing progress chunk (return_progress), in llama.cpp's server's shape: a chunk
// whose delta adds no content, with `prompt_progress` {total, cache, processed, time_ms}.
OrderedJson progress_chunk(const ResponseMeta& meta, const scheduler::PromptProgress& progress);
OrderedJson prompt_progress_json(const scheduler::PromptProgress& progress);

OrderedJson models_body(const std::string& served_id, const engine::ModelInfo& model, std::int64_t created);
OrderedJson model_body(const std::string& served_id, const engine::ModelInfo& model, std::int64_t created);

}  // namespace prefixd::api
