#include "api/scheduler_metrics.h"

#include <chrono>

namespace prefixd::api {
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
  r.counter("prefixd_lora_adapter_switches_total",
            "Times the model's LoRA adapters changed because requests under another adapter set took their turn.",
            stats.adapter_switches_total);
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

}  // namespace prefixd::api
