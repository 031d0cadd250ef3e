#include "api/openai/responses.h"

#include <format>

namespace prefixd::api {
namespace {

const char* object_name(const ResponseMeta& meta, bool chunk) {
  if (meta.endpoint == Endpoint::chat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";  // OpenAI uses the same object name for completion chunks
}

OrderedJson header(const ResponseMeta& meta, bool chunk) {
  return {{"id", meta.id}, {"object", object_name(meta, chunk)}, {"created", meta.created}, {"model", meta.model}};
}

OrderedJson choice(const ResponseMeta& meta, OrderedJson content, OrderedJson finish_reason, bool chunk,
                   OrderedJson logprobs = nullptr) {
  OrderedJson c = {{"index", 0}};
  if (meta.endpoint == Endpoint::chat) {
    c[chunk ? "delta" : "message"] = std::move(content);
  } else {
    c["text"] = std::move(content);
  }
  c["logprobs"] = std::move(logprobs);
  c["finish_reason"] = std::move(finish_reason);
  return c;
}

double per_second(std::int64_t count, double ms) { return ms > 0 ? 1000.0 * static_cast<double>(count) / ms : 0.0; }

OrderedJson null_if_empty(const std::string& s) { return s.empty() ? OrderedJson(nullptr) : OrderedJson(s); }

OrderedJson byte_values(std::string_view piece) {
  OrderedJson bytes = OrderedJson::array();
  for (const char c : piece) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

OrderedJson chat_token(const scheduler::TokenLogprob& t) {
  return {{"id", t.id}, {"token", t.piece}, {"logprob", t.logprob}, {"bytes", byte_values(t.piece)}};
}

}  // namespace

OrderedJson logprobs_json(const ResponseMeta& meta, std::span<const scheduler::GeneratedLogprobs> tokens,
                          std::size_t& offset) {
  if (!meta.logprobs) return nullptr;
  if (meta.endpoint == Endpoint::chat) {
    OrderedJson content = OrderedJson::array();
    for (const auto& t : tokens) {
      OrderedJson entry = chat_token(t.chosen);
      entry["top_logprobs"] = OrderedJson::array();
      for (const auto& alt : t.top) entry["top_logprobs"].push_back(chat_token(alt));
      content.push_back(std::move(entry));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  OrderedJson out = {{"tokens", OrderedJson::array()},
                     {"token_logprobs", OrderedJson::array()},
                     {"top_logprobs", OrderedJson::array()},
                     {"text_offset", OrderedJson::array()}};
  for (const auto& t : tokens) {
    out["tokens"].push_back(t.chosen.piece);
    out["token_logprobs"].push_back(t.chosen.logprob);
    OrderedJson top = OrderedJson::object();
    for (const auto& alt : t.top) top[alt.piece] = alt.logprob;
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(offset);
    offset += t.chosen.piece.size();
  }
  return out;
}

const char* finish_reason_text(scheduler::FinishReason reason) {
  switch (reason) {
    case scheduler::FinishReason::length: return "length";
    case scheduler::FinishReason::error: return "error";
    case scheduler::FinishReason::stop:
    case scheduler::FinishReason::cancelled: return "stop";
  }
  return "stop";
}

OrderedJson usage_json(const scheduler::Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

OrderedJson prompt_cache_json(const scheduler::CacheReport& report) {
  const bool hit = report.cached_tokens > 0;
  OrderedJson out = {{"outcome", cache::outcome_name(report.outcome)},
                     {"cached_tokens", report.cached_tokens},
                     {"fed_tokens", report.fed_tokens},
                     {"shifted_tokens", report.shifted_tokens},
                     {"tier", null_if_empty(cache::tier_name(report.tier))},
                     {"scope", null_if_empty(hit ? (report.in_session ? "in_session" : "cross_session") : "")},
                     {"seconds_saved", report.seconds_saved}};
  if (!report.changed_inputs.empty()) out["changed_inputs"] = report.changed_inputs;
  // The draft model's own prompt cache: what it reused and computed of this request's tokens.
  if (report.draft) out["draft"] = {{"cached_tokens", report.draft->cached_tokens}, {"fed_tokens", report.draft->fed_tokens}};
  if (report.images > 0) {
    // cached: images whose every position came from the cache; embeddings_reused: images computed
    // again from kept embeddings; encoded: images the vision encoder ran for.
    out["images"] = {{"count", report.images},
                     {"cached", report.images_cached},
                     {"embeddings_reused", report.image_embeddings_reused},
                     {"encoded", report.images_encoded}};
  }
  return out;
}

OrderedJson timings_json(const scheduler::StreamEvent& done) {
  // Prompt speed counts the tokens actually run through the model: cached tokens cost nothing.
  const std::int64_t prompt_n = done.cache.fed_tokens;
  const std::int64_t predicted_n = done.usage.completion_tokens;
  OrderedJson out = {{"queued_ms", done.timings.queued_ms},
                     {"prompt_n", prompt_n},
                     {"prompt_ms", done.timings.prefill_ms},
                     {"prompt_per_second", per_second(prompt_n, done.timings.prefill_ms)},
                     {"predicted_n", predicted_n},
                     {"predicted_ms", done.timings.decode_ms},
                     {"predicted_per_second", per_second(predicted_n, done.timings.decode_ms)}};
  // llama-server's names: drafted tokens verified, and of those the ones the model drew too.
  if (done.timings.speculative) {
    out["draft_n"] = done.timings.draft_n;
    out["draft_n_accepted"] = done.timings.draft_accepted;
  }
  return out;
}

OrderedJson completion_body(const ResponseMeta& meta, std::string_view text, const scheduler::StreamEvent& done,
                            std::span<const scheduler::GeneratedLogprobs> logprobs, std::string_view reasoning) {
  OrderedJson body = header(meta, false);
  OrderedJson content = meta.endpoint == Endpoint::chat
                            ? OrderedJson{{"role", "assistant"}, {"content", text}}
                            : OrderedJson(text);
  if (!reasoning.empty()) content["reasoning_content"] = reasoning;
  std::size_t offset = 0;
  body["choices"] = OrderedJson::array({choice(meta, std::move(content), finish_reason_text(done.finish), false,
                                               logprobs_json(meta, logprobs, offset))});
  body["usage"] = usage_json(done.usage);
  body["prompt_cache"] = prompt_cache_json(done.cache);
  body["timings"] = timings_json(done);
  return body;
}

const char* tool_call_finish_reason(scheduler::FinishReason reason) {
  return reason == scheduler::FinishReason::stop ? "tool_calls" : finish_reason_text(reason);
}

OrderedJson tool_call_body(const ResponseMeta& meta, const ParsedAssistant& parsed, const scheduler::StreamEvent& done,
                           std::span<const scheduler::GeneratedLogprobs> logprobs) {
  if (parsed.tool_calls.empty()) return completion_body(meta, parsed.content, done, logprobs, parsed.reasoning);
  OrderedJson body = header(meta, false);
  OrderedJson message{{"role", "assistant"},
                      {"content", parsed.content.empty() ? OrderedJson(nullptr) : OrderedJson(parsed.content)}};
  if (!parsed.reasoning.empty()) message["reasoning_content"] = parsed.reasoning;
  message["tool_calls"] = tool_calls_json(parsed.tool_calls);
  std::size_t offset = 0;
  body["choices"] = OrderedJson::array({choice(meta, std::move(message), tool_call_finish_reason(done.finish), false,
                                               logprobs_json(meta, logprobs, offset))});
  body["usage"] = usage_json(done.usage);
  body["prompt_cache"] = prompt_cache_json(done.cache);
  body["timings"] = timings_json(done);
  return body;
}

OrderedJson tool_call_chunk(const ResponseMeta& meta, const ToolCallDelta& delta,
                            std::span<const scheduler::GeneratedLogprobs> logprobs, std::size_t& offset) {
  OrderedJson chunk = header(meta, true);
  OrderedJson content{{"tool_calls", OrderedJson::array({tool_call_delta_json(delta)})}};
  chunk["choices"] = OrderedJson::array({choice(meta, std::move(content), nullptr, true, logprobs_json(meta, logprobs, offset))});
  return chunk;
}

OrderedJson role_chunk(const ResponseMeta& meta) {
  OrderedJson chunk = header(meta, true);
  chunk["choices"] = OrderedJson::array({choice(meta, {{"role", "assistant"}, {"content", ""}}, nullptr, true)});
  return chunk;
}

OrderedJson activity_chunk(const ResponseMeta& meta) {
  OrderedJson chunk = header(meta, true);
  OrderedJson content = meta.endpoint == Endpoint::chat ? OrderedJson::object() : OrderedJson("");
  chunk["choices"] = OrderedJson::array({choice(meta, std::move(content), nullptr, true)});
  return chunk;
}

OrderedJson prompt_progress_json(const scheduler::PromptProgress& progress) {
  return {{"total", progress.total},
          {"cache", progress.cached},
          {"processed", progress.processed},
          {"time_ms", progress.elapsed_ms}};
}

OrderedJson progress_chunk(const ResponseMeta& meta, const scheduler::PromptProgress& progress) {
  OrderedJson chunk = header(meta, true);
  OrderedJson content =
      meta.endpoint == Endpoint::chat ? OrderedJson{{"role", "assistant"}, {"content", nullptr}} : OrderedJson("");
  chunk["choices"] = OrderedJson::array({choice(meta, std::move(content), nullptr, true)});
  chunk["prompt_progress"] = prompt_progress_json(progress);
  return chunk;
}

OrderedJson reasoning_chunk(const ResponseMeta& meta, std::string_view text) {
  OrderedJson chunk = header(meta, true);
  chunk["choices"] = OrderedJson::array({choice(meta, {{"reasoning_content", text}}, nullptr, true)});
  return chunk;
}

OrderedJson text_chunk(const ResponseMeta& meta, std::string_view text,
                       std::span<const scheduler::GeneratedLogprobs> logprobs, std::size_t& offset) {
  OrderedJson chunk = header(meta, true);
  OrderedJson content = meta.endpoint == Endpoint::chat ? OrderedJson{{"content", text}} : OrderedJson(text);
  chunk["choices"] = OrderedJson::array({choice(meta, std::move(content), nullptr, true, logprobs_json(meta, logprobs, offset))});
  return chunk;
}

OrderedJson finish_chunk(const ResponseMeta& meta, const scheduler::StreamEvent& done, const char* finish_reason) {
  OrderedJson chunk = header(meta, true);
  OrderedJson content = meta.endpoint == Endpoint::chat ? OrderedJson::object() : OrderedJson("");
  chunk["choices"] = OrderedJson::array(
      {choice(meta, std::move(content), finish_reason != nullptr ? finish_reason : finish_reason_text(done.finish), true)});
  chunk["usage"] = usage_json(done.usage);
  chunk["prompt_cache"] = prompt_cache_json(done.cache);
  chunk["timings"] = timings_json(done);
  return chunk;
}

OrderedJson usage_chunk(const ResponseMeta& meta, const scheduler::StreamEvent& done) {
  OrderedJson chunk = header(meta, true);
  chunk["choices"] = OrderedJson::array();
  chunk["usage"] = usage_json(done.usage);
  return chunk;
}

OrderedJson model_body(const std::string& served_id, const engine::ModelInfo& model, std::int64_t created) {
  return {{"id", served_id},
          {"object", "model"},
          {"created", created},
          {"owned_by", "prefixd"},
          {"meta",
           {{"n_ctx_train", model.n_ctx_train},
            {"n_params", model.n_params},
            {"n_vocab", model.n_vocab},
            {"family", engine::family_name(model.family)},
            {"architecture", model.architecture}}}};
}

OrderedJson models_body(const std::string& served_id, const engine::ModelInfo& model, std::int64_t created) {
  return {{"object", "list"}, {"data", OrderedJson::array({model_body(served_id, model, created)})}};
}

}  // namespace prefixd::api
