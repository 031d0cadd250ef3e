#include "api/openai/responses.h"

#include <chrono>
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

std::string dump_json(const OrderedJson& value) {
  return value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_data(const OrderedJson& payload) { return "data: " + dump_json(payload) + "\n\n"; }
std::string sse_data(const nlohmann::json& payload) { return "data: " + dump_json(payload) + "\n\n"; }

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

namespace {

void add_ttft_metrics(metrics::Registry& r, const scheduler::SchedulerStats& stats) {
  const auto& bounds = scheduler::SchedulerStats::kTtftBounds;
  r.histogram("prefixd_time_to_first_token_seconds", "Time from a request's arrival to its first generated token.",
              {bounds, stats.ttft_buckets, stats.ttft_count, stats.ttft_sum_seconds});
  for (int i = 0; i < cache::kOutcomeCount; ++i) {
    const auto& h = stats.ttft_by_outcome[static_cast<size_t>(i)];
    r.histogram("prefixd_time_to_first_token_by_cache_outcome_seconds",
                "Time from a request's arrival to its first generated token, by what the prompt cache did for it.",
                {bounds, h.buckets, h.count, h.sum_seconds},
                {{"outcome", cache::outcome_name(static_cast<cache::Outcome>(i))}});
  }
}

// Where the scheduler thread's time goes (scheduler/step_clock.h): each step whole and by phase
// (the phases' sums add up to the steps' sum), its waits for work, and the steps that drew a token.
void add_step_metrics(metrics::Registry& r, const scheduler::SchedulerStats& stats) {
  const auto& bounds = scheduler::SchedulerStats::kStepBounds;
  const auto seconds = [](scheduler::StepTimes::Duration d) { return std::chrono::duration<double>(d).count(); };
  r.histogram("prefixd_step_seconds", "Scheduler steps (turns of its loop that had work), whole.",
              {bounds, stats.steps.buckets, stats.steps.count, seconds(stats.steps.sum)});
  for (const scheduler::StepPhase phase : scheduler::kStepPhases) {
    const auto& h = stats.step_phases[static_cast<size_t>(phase)];
    r.histogram("prefixd_step_phase_seconds",
                "Scheduler steps by phase: compute (model calls), sampling, output (text and events), cache, "
                "scheduling (the rest); one observation per step and phase.",
                {bounds, h.buckets, h.count, seconds(h.sum)}, {{"phase", std::string(scheduler::step_phase_name(phase))}});
  }
  r.counter("prefixd_scheduler_idle_seconds_total", "Time the scheduler thread waited for work (not part of any step).",
            seconds(stats.idle));
  r.counter("prefixd_decode_steps_total", "Scheduler steps in which at least one request drew a token.",
            static_cast<double>(stats.decode_steps_total));
}

// The prefill time the prefix cache saved (its tokens, in the field's units, are the cache's:
// add_cache_metrics).
void add_field_metrics(metrics::Registry& r, const scheduler::SchedulerStats& stats) {
  r.counter("prefixd_prefill_seconds_saved_total",
            "Prefill time the served tokens would have cost, at the prefill rate measured when they were served.",
            stats.prefill_seconds_saved);
}

}  // namespace

void add_scheduler_metrics(metrics::Registry& r, const scheduler::SchedulerStats& stats) {
  r.counter("prefixd_requests_total", "Requests admitted by the scheduler.", stats.requests_total);
  r.counter("prefixd_requests_rejected_total", "Requests the scheduler refused (queue full, too long).",
             stats.requests_rejected);
  r.counter("prefixd_prompt_tokens_total", "Prompt tokens of finished requests.", stats.prompt_tokens_total);
  r.counter("prefixd_prompt_tokens_fed_total", "Prompt tokens run through the model (the rest came from the prompt cache).", stats.prompt_tokens_fed_total);
  r.counter("prefixd_generated_tokens_total", "Tokens generated.", stats.generated_tokens_total);
  r.counter("prefixd_warmup_tokens_total", "Tokens fed after replies so the next turn resumes after the assistant's end of turn.",
             stats.warmup_tokens_total);
  r.counter("prefixd_prompt_input_changes_total", "Requests of a named session whose chat template, kwargs, tools or tool_choice differ from its previous "
             "request's.",
             stats.prompt_input_changes_total);
  r.counter("prefixd_prefill_preemptions_total",
            "Running prefills that gave way to a queued request with far less to compute (they resume from the cache).",
            stats.prefill_preemptions_total);
  r.counter("prefixd_images_total", "Images in the prompts of finished requests.", stats.images_total);
  r.counter("prefixd_images_cached_total", "Images whose every position was reused from the prompt cache.", stats.images_cached_total);
  r.counter("prefixd_images_encoded_total", "Images the vision encoder ran for.",
             stats.images_encoded_total);
  r.counter("prefixd_image_embedding_hits_total", "Images computed again from kept embeddings instead of the vision encoder.",
             stats.image_embedding_hits_total);
  r.gauge("prefixd_image_embeddings", "Image embeddings kept by digest.", stats.image_embeddings);
  r.gauge("prefixd_image_embedding_bytes", "Bytes of the image embeddings kept.",
             static_cast<double>(stats.image_embedding_bytes));
  r.counter("prefixd_draft_tokens_total", "Speculative draft tokens verified by the model.", stats.draft_tokens_total);
  r.counter("prefixd_draft_tokens_accepted_total", "Speculative draft tokens the model drew too (each one a decode step saved).",
            stats.draft_tokens_accepted_total);
  r.histogram("prefixd_draft_accepted_tokens", "Draft tokens accepted per verification (one per request and step that drafted).",
              {scheduler::SchedulerStats::kAcceptedBounds, stats.accepted_buckets, stats.verifications_total,
               static_cast<double>(stats.draft_tokens_accepted_total)});
  r.gauge("prefixd_draft_pool_entries", "Replies kept for n-gram drafting.", stats.draft_pool_entries);
  r.gauge("prefixd_draft_pool_tokens", "Tokens of the replies kept for n-gram drafting.", stats.draft_pool_tokens);
  r.gauge("prefixd_requests_running", "Requests holding a sequence now.", stats.running);
  r.gauge("prefixd_requests_queued", "Requests waiting for a sequence.", stats.queued);
  // The model-server protocol's KVCacheUtilization (vLLM's kv_cache_usage_perc): a fraction.
  r.gauge("prefixd_kv_cache_usage_ratio",
          "Fraction of the context's KV cells the running requests hold (idle cached prefixes give way, so are free).",
          stats.kv_cells_total > 0 ? static_cast<double>(stats.kv_cells_running) / static_cast<double>(stats.kv_cells_total) : 0.0);
  add_ttft_metrics(r, stats);
  add_step_metrics(r, stats);
  add_field_metrics(r, stats);
}

IdGenerator::IdGenerator() : rng_(std::random_device{}()) {}

std::string IdGenerator::next(std::string_view prefix) {
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  {
    std::lock_guard lock(mutex_);
    a = rng_();
    b = rng_();
  }
  return std::format("{}{:016x}{:08x}", prefix, a, static_cast<std::uint32_t>(b));
}

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace prefixd::api
