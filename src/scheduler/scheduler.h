// prefixd scheduler — the one thread that owns the engine.
//
// Owns: the admission queue, the running requests (one sequence id each), continuous batching
// (prefill chunks of up to batch_size tokens interleaved with one decode step of every running
// request), sampling, stop strings, streaming tokens to RequestStreams, and the calls into the
// prompt cache at request boundaries, through its request-life face (cache/request_life.h). Its
// parts are listed in scheduler_impl.h; session_memory.h keeps what a session's previous request
// and reply were.
// Only the inbox of submitted requests, queued commands and the counters are shared with other
// threads (under one mutex); the cache's work never runs under it.
// Must not know: HTTP or JSON; the cache's internal layout.
#pragma once

#include <array>
#include <chrono>
#include <atomic>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "cache/cache_admin.h"
#include "cache/cache_types.h"
#include "cache/kv_events.h"
#include "engine/engine.h"
#include "scheduler/request.h"
#include "scheduler/step_clock.h"

namespace prefixd::scheduler {

// Which prompts share the batch in which one of them completes its prefill.
//  - off: none; the batch ends with the completing prompt (a short prompt never waits for others).
//  - bounded: only prompts that complete in it too, and only while what a joining prompt spares
//    (one step, of at least the batch's decode tokens, for it and every prompt waiting behind it)
//    outweighs what it costs (its tokens, for every prompt completing there): many short later
//    turns beside many generating streams finish in one step instead of one step each, while a
//    few prompts beside a few streams each get a short step of their own. No completing prompt
//    waits for a chunk of an unfinished one.
//  - on: any prompt, up to the batch size.
enum class PrefillPacking { off, bounded, on };

// Speculative decoding: tokens guessed ahead of the model and checked in the same row-wise call as
// the request's decode token (src/speculative, scheduler_drafts.cpp). Every emitted token is the
// model's own draw from its own row, so a draft only changes how many tokens a step yields.
struct SpeculationOptions {
  // ngram: guesses from text seen before (src/speculative); model: a draft model's greedy guesses
  // (ModelDrafter; the Scheduler is given the drafter's engine).
  enum class Type { none, ngram, model };
  Type type = Type::none;
  std::int32_t draft_max = 16;  // most tokens drafted for one request at one step
  std::int32_t draft_min = 2;   // a shorter guess is not verified
  // Draft only as long as the measured call costs say a draft pays (speculative::best_draft_length),
  // or (false) verify every guess of at least draft_min tokens, up to draft_max.
  bool only_paying = true;
  std::size_t pool_tokens = std::size_t{1} << 20;  // earlier replies kept for drafting (speculative::OutputPool)
  // A draft model's guess it gives less probability than this ends its draft (llama-server's
  // --spec-draft-p-min, whose default is 0 too: the economics decide the length).
  float p_min = 0;
};

struct SchedulerOptions {
  std::int32_t n_slots = 4;       // requests running at once; they use sequence ids [0, n_slots)
  std::int32_t max_queued = 64;   // requests waiting for a slot; more are refused
  // Sequence ids [n_slots, n_slots + cache_holders) hold cached prefixes; the next one is the
  // cache's scratch sequence. The engine must have n_slots + cache_holders + 1 sequences.
  std::int32_t cache_holders = 16;
  // How many prompts may complete their prefill in one batch (PrefillPacking). nullopt: `on` on a
  // GPU, where a larger batch costs little more; `bounded` on the CPU, where a batch costs time in
  // proportion to its tokens.
  std::optional<PrefillPacking> prefill_packing;
  // After a reply, feed the end of the assistant turn the template renders in the next request
  // and keep the sequence with it (see CacheOptions::continuation).
  bool cache_warmup = true;
  // Image embeddings kept by digest (image_embeddings.h): the byte budget.
  std::uint64_t image_embedding_bytes = 256ull << 20;
  SpeculationOptions speculation;
  cache::CacheConfig cache;
  // KV events (cache/kv_events.h): with a sink, the cache records the changes of the blocks of the
  // scopes `scopes` accepts, and the engine thread hands them to the sink (which must not block)
  // after a turn of its loop, at most once per `interval`; an idle server looks once a second (the
  // disk tier's writes land after the last request).
  struct KvEvents {
    std::function<void(std::vector<cache::KvEvent>)> sink;
    cache::KvEventScopes scopes;
    std::chrono::milliseconds interval{20};
  } kv_events;
};

enum class SubmitError { queue_full, prompt_too_long, empty_prompt, shutting_down };
const char* submit_error_message(SubmitError error);

struct SchedulerStats {
  std::int64_t requests_total = 0;
  std::int64_t requests_rejected = 0;
  std::int64_t prompt_tokens_total = 0;      // prompt tokens of finished requests
  std::int64_t prompt_tokens_fed_total = 0;  // prompt tokens run through the model
  std::int64_t generated_tokens_total = 0;
  std::int64_t warmup_tokens_total = 0;      // tokens fed after replies for the next turn (warm-up)
  std::int64_t warmups_total = 0;            // replies whose sequence was warmed up
  std::int64_t prompt_input_changes_total = 0;  // requests whose session changed template inputs
  std::int64_t prefill_preemptions_total = 0;   // cold prefills that gave way to a request that fits after
  std::int64_t adapter_switches_total = 0;      // turns handed to another LoRA adapter set (choose_adapters)

  // Images in the prompts of finished requests; of which every position was reused from the cache;
  // the vision encoder's runs; embeddings taken from the embedding cache instead; what it keeps.
  std::int64_t images_total = 0;
  std::int64_t images_cached_total = 0;
  std::int64_t images_encoded_total = 0;
  std::int64_t image_embedding_hits_total = 0;
  std::int64_t image_embeddings = 0;
  std::uint64_t image_embedding_bytes = 0;
  std::uint64_t image_embedding_capacity_bytes = 0;
  std::int32_t running = 0;
  std::int32_t queued = 0;
  // KV cells the running requests' sequences hold (as of the last admission), and the context's
  // cells: what a router reads as the KV cache's utilization. Idle cached prefixes are not counted:
  // they give way to any request that needs their cells.
  std::int64_t kv_cells_running = 0;
  std::int64_t kv_cells_total = 0;
  // Time to first token (submission to first sampled token), as cumulative histogram buckets.
  static constexpr std::array<double, 12> kTtftBounds = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  std::array<std::int64_t, kTtftBounds.size()> ttft_buckets{};
  std::int64_t ttft_count = 0;
  double ttft_sum_seconds = 0;
  // The same histogram by what the prompt cache did for the request (cache::Outcome).
  struct TtftHistogram {
    std::array<std::int64_t, kTtftBounds.size()> buckets{};
    std::int64_t count = 0;
    double sum_seconds = 0;
  };
  std::array<TtftHistogram, cache::kOutcomeCount> ttft_by_outcome{};
  // The prefill time the prefix cache's served tokens would have cost at the prefill rate
  // measured when they were served (0 until a prefill was measured), counted as each request's
  // lookup is final. The tokens themselves are the cache's count (CacheStats::tokens_reused_by_tier).
  double prefill_seconds_saved = 0;

  // Speculative decoding: tokens drafted and verified, of which the model drew the same, and one
  // histogram observation per verification of the draft tokens it accepted (cumulative buckets).
  std::int64_t draft_tokens_total = 0;
  std::int64_t draft_tokens_accepted_total = 0;
  static constexpr std::array<double, 8> kAcceptedBounds = {0, 1, 2, 4, 8, 16, 32, 64};
  std::array<std::int64_t, kAcceptedBounds.size()> accepted_buckets{};
  std::int64_t verifications_total = 0;
  // Replies kept for n-gram drafting, and their tokens.
  std::int64_t draft_pool_entries = 0;
  std::int64_t draft_pool_tokens = 0;

  // The scheduler thread's time (step_clock.h): each step (a turn of its loop that had requests,
  // commands or idle compaction to run), whole and by phase, as cumulative histogram buckets with
  // the sums kept exact, so that the phases' sums add up to the steps' sum; the time it waited for
  // work; and the steps in which some request drew a token (generated tokens / decode steps is the
  // tokens a step yields).
  static constexpr std::array<double, 16> kStepBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                         0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10};
  struct StepHistogram {
    std::array<std::int64_t, kStepBounds.size()> buckets{};
    std::int64_t count = 0;
    StepTimes::Duration sum{};
    void observe(StepTimes::Duration took);
  };
  StepHistogram steps;
  std::array<StepHistogram, kStepPhaseCount> step_phases{};
  StepTimes::Duration idle{};
  std::int64_t decode_steps_total = 0;
};

class Scheduler {
 public:
  // `drafter`: the draft model's engine when options.speculation.type is model (its vocabulary
  // checked against the target's by the caller: speculative::vocabulary_difference), with
  // sequence ids for n_slots + cache_holders + 1 sequences; it must outlive the scheduler.
  Scheduler(engine::Engine& engine, SchedulerOptions options, engine::Engine* drafter = nullptr);
  ~Scheduler();  // cancels everything still queued or running and joins the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. The returned stream delivers its tokens and exactly one `done` event.
  std::expected<std::shared_ptr<RequestStream>, SubmitError> submit(GenerationRequest request);

  SchedulerStats stats() const;
  std::int32_t max_prompt_tokens() const;  // longest prompt that can be admitted

  // The cache's configuration with its defaults resolved for the engine.
  const cache::CacheConfig& cache_config() const;
  // Thread-safe snapshot of the prompt cache's counters and sizes.
  cache::CacheStats cache_stats() const;
  // The same of the draft model's own prompt cache; nullopt without a draft model.
  std::optional<cache::CacheStats> draft_cache_stats() const;
  // Empties every tier, or with `scope` removes that scope's entries from every tier (runs on the
  // scheduler thread; blocks until done).
  cache::ResetReport reset_cache(const std::optional<cache::ScopeId>& scope = std::nullopt);
  // Runs `operation` with the cache's admin face on the scheduler thread, between batches, and
  // waits for it; an exception it throws is rethrown here. Returns false (nothing run) when the
  // scheduler is stopping.
  bool ask_cache(const std::function<void(cache::CacheAdmin&)>& operation);
  // The latest sequence `session` of `scope` left to the cache (its key and tokens; session_memory.h),
  // as the scheduler thread knows it; nullopt when none; shutting_down when the scheduler is stopping.
  std::expected<std::optional<SessionPrompt>, SubmitError> session_prompt(const cache::ScopeId& scope, const std::string& session);
  // The slots (sequences [0, n_slots)) as the scheduler thread sees them.
  std::expected<std::vector<SlotState>, SubmitError> slots();
  // The sequence the last request that ran in slot `id` left to the cache; nullopt when none.
  std::expected<std::optional<SessionPrompt>, SubmitError> slot_prompt(std::int32_t id);
  // Forgets that sequence: the cache drops what it holds of it past the longest prefix another
  // slot's last sequence shares (llama-server's slot erase). Returns the tokens it held (0: none).
  std::expected<std::int32_t, SubmitError> erase_slot(std::int32_t id);
  std::int32_t slot_count() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixd::scheduler
