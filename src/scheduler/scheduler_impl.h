// prefixd scheduler — the scheduler thread's state and its jobs, one file each:
// scheduler.cpp (the loop, submission, commands, shutdown), scheduler_admission.cpp (queued
// requests' tickets offered to the cache in arrival order, the cache's answer applied),
// scheduler_step.cpp (batching, sampling, stops, decode-failure recovery, finishing a request),
// scheduler_warmup.cpp (feeding the end of a turn after a reply), scheduler_images.cpp (an
// image's rows), scheduler_drafts.cpp (speculative decoding: drafts and their verification; a
// draft model's lanes and cache in model_drafter.h). Where the thread's time goes, by phase of a
// step: step_clock.h. Internal to src/scheduler.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "cache/cache_admin.h"
#include "cache/cache_operations.h"
#include "cache/request_life.h"
#include "scheduler/image_embeddings.h"
#include "scheduler/masked_draws.h"
#include "scheduler/model_drafter.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_internal.h"
#include "scheduler/session_memory.h"
#include "speculative/ngram_drafter.h"
#include "speculative/output_pool.h"

namespace prefixd::cache {
class PrefixCache;  // owned here, used only through its faces: its header is scheduler.cpp's alone
}  // namespace prefixd::cache

namespace prefixd::scheduler {

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The order in which prompts get prefill (scheduler_step.cpp).
bool prefills_before(const Active* x, const Active* y);

class Scheduler::Impl {
 public:
  Impl(engine::Engine& engine, SchedulerOptions options, engine::Engine* drafter);
  ~Impl();

  std::expected<std::shared_ptr<RequestStream>, SubmitError> submit(GenerationRequest request);
  SchedulerStats stats() const;
  cache::CacheStats cache_stats() const { return operations().stats(); }
  std::optional<cache::CacheStats> draft_cache_stats() const {
    return drafter_ ? std::optional(drafter_->cache().stats()) : std::nullopt;
  }
  const cache::CacheConfig& cache_config() const { return operations().config(); }
  cache::ResetReport reset_cache(const std::optional<cache::ScopeId>& scope);
  bool ask_cache(const std::function<void(cache::CacheAdmin&)>& operation);
  std::expected<std::optional<SessionPrompt>, SubmitError> session_prompt(const cache::ScopeId& scope, const std::string& session);
  std::expected<std::vector<SlotState>, SubmitError> slots();
  std::expected<std::optional<SessionPrompt>, SubmitError> slot_prompt(std::int32_t id);
  std::expected<std::int32_t, SubmitError> erase_slot(std::int32_t id);
  std::int32_t slot_count() const { return options_.n_slots; }
  // One cell is kept free for the first generated token.
  std::int32_t max_prompt_tokens() const { return engine_.context_size() - 1; }

 private:
  using Chunk = std::pair<Active*, std::int32_t>;  // a request and the prompt tokens it adds this step

  // scheduler.cpp
  std::unexpected<SubmitError> reject(SubmitError error);
  // Runs `job` on the scheduler thread between batches and waits for it (an exception it throws
  // is rethrown here); false, with nothing run, when the scheduler is stopping.
  bool run_on_thread(const std::function<void()>& job);
  void run();
  // Adds a loop turn to the stats (REQUIRES: mutex_ held): as a step when it was one, and its wait.
  void record_turn(const StepClock::Turn& turn, bool sampled);
  void on_lookup_done();  // on the shared tier's reader thread
  void shutdown();
  // Hands the cache's KV events to the sink when they are due (SchedulerOptions::kv_events).
  void publish_kv_events();

  // scheduler_admission.cpp
  void open_tickets();
  void admit();
  bool has_sampler(Queued& q);
  bool admissible_queued() const;
  Clock::duration lookup_wait_limit(Clock::duration limit) const;
  std::int64_t running_cells() const;
  void start(Queued queued, const cache::Acquisition& got);
  void apply(Active& a, const cache::Acquisition& got);
  bool preempt_for(Queued& head);
  void preempt(std::size_t index, std::uint64_t behind);
  // Tells the request's client how far its prompt has come (a progress event): once the cache has
  // answered, then after each prefill chunk, and at the prompt's last token, before it is sampled
  // from (`processed` n_prompt - 1, also when a tail computed the tokens before it in the same
  // call). Warm-ups have no client.
  void report_progress(Active& a);
  void report_progress(Active& a, std::int32_t processed);
  void observe_prompt_inputs(Active& a);
  void take_resolved_prefixes();
  // Ends the running requests and the queued ones whose clients cancelled them.
  void drop_cancelled();
  void finish_unstarted(Queued& q, FinishReason reason, std::string error);

  // scheduler_step.cpp
  void step();
  void choose_adapters();
  std::int32_t prefill_end(const Active& a) const;
  bool has_sampled_row(const Active& a) const;
  bool tail_joins_rowwise_call(const Active& a) const;
  std::int32_t sampled_rows(const Active& a) const;
  bool prefill_calls();
  void sampled_calls();
  void observe_prefill_speed(std::span<const Chunk> chunks, Clock::duration took);
  void observe_ttft(double seconds, cache::Outcome outcome);
  FinishReason finish_reason_for(const Active& a) const;
  void sample_all();
  void defer_draw(Active& a, std::int32_t row);
  void take_masked_draws();
  bool take_token(Active& a, engine::Token token, std::span<const float> logits);
  void settle(size_t& index, bool more);
  bool runnable() const;
  void recover_from_failed_decode(engine::DecodeStatus status);
  void requeue(size_t index);
  void finish(size_t index, FinishReason reason, std::string error);
  void finish_prefills();
  void take_embedding(Active& a, std::int32_t first_row, std::int32_t rows);
  void finish_embedding(size_t index);
  void end_sequence(Active& a, bool keep);

  // scheduler_images.cpp
  bool prefill_next_image();
  bool prefill_image(size_t index, const PromptImage& image);  // index into active_

  // scheduler_drafts.cpp
  void set_up_speculation(engine::Engine* drafter);
  void start_drafting(Active& a);
  void plan_drafts();
  void plan_model_drafts(std::int64_t spare, std::int32_t rows);
  std::int64_t draft_room(const Active& a, std::int64_t spare) const;
  void verify_draft(size_t& index);
  void count_verification(Active& a, std::int32_t drafted, std::int32_t accepted);
  void roll_back_states();
  void remember_output(const Active& a);
  void forget_outputs(const std::optional<cache::ScopeId>& scope);

  // scheduler_warmup.cpp
  void remember_reply(const Active& a);
  bool warmup_applies(const Active& a) const;
  void start_warmup(std::unique_ptr<Active> a);
  void finish_warmups();
  void end_warmup(size_t index, bool keep);

  engine::Engine& engine_;
  SchedulerOptions options_;
  // Where the scheduler thread's time goes (step_clock.h): the work below opens a Scope for each
  // phase but scheduling. Read and written by the scheduler thread only, the draft model included.
  StepClock step_clock_;
  bool turn_sampled_ = false;  // a request drew a token in the open turn (SchedulerStats::decode_steps_total)

  // Owned by the scheduler thread, and used only through its faces (defined in scheduler.cpp, the
  // one file that sees the concrete class): the request life through life() alone, the admin face
  // (ask_cache, erase_slot) through admin(), and resets, KV events and the stats and configuration
  // reads (any thread: stats() is thread-safe, the configuration fixed) through operations().
  std::unique_ptr<cache::PrefixCache> cache_;
  Clock::time_point last_kv_events_{};
  bool kv_events_dirty_ = false;  // the loop turned since the cache's events were last taken
  cache::RequestLife& life();
  const cache::RequestLife& life() const;
  cache::CacheAdmin& admin();
  cache::CacheOperations& operations();
  const cache::CacheOperations& operations() const;
  std::vector<std::unique_ptr<Active>> active_;
  std::uint64_t step_serial_ = 0;  // steps taken: Active::last_step
  // The LoRA adapter set whose turn it is and when the turn began (choose_adapters, kAdapterTurn).
  std::vector<engine::AdapterScale> turn_adapters_;
  Clock::time_point turn_started_{};
  std::vector<engine::BatchToken> batch_;
  PrefillPacking packing_ = PrefillPacking::off;  // which prompts share a completing batch (see step())
  double seconds_per_prompt_token_ = 0;  // measured (observe_prefill_speed); 0 until a prefill ran
  SessionMemory sessions_;
  // What the last request in each slot (sequence id) left to the cache: what /slots saves and erases.
  std::vector<std::optional<SessionPrompt>> slot_kept_ = std::vector<std::optional<SessionPrompt>>(
      static_cast<std::size_t>(std::max(0, options_.n_slots)));
  // Admitted in arrival order once a sequence is free, its lookup is done and the prompt fits;
  // emptied by shutdown(), so that no ticket outlives mutex_ and wake_, which its lookup signals.
  std::deque<Queued> queue_;
  std::vector<engine::SeqId> free_seqs_;
  ImageEmbeddings image_embeddings_{options_.image_embedding_bytes};
  // Speculative decoding: on for this model (set_up_speculation), and the replies n-gram drafting
  // reads (per namespace).
  bool speculation_ = false;
  // A rejected draft is rolled back by restoring the state saved before its call and computing the
  // tokens taken again (recurrent and hybrid models), not by cutting its cells.
  bool rollback_by_checkpoint_ = false;
  speculative::OutputPool outputs_{options_.speculation.pool_tokens};
  speculative::RowCosts row_costs_;  // the sampled calls' times, by their rows
  std::unique_ptr<ModelDrafter> drafter_;  // a draft model's guesses (type model)

  // Shared with submitters; guarded by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> inbox_;        // submitted, not yet taken by the scheduler thread
  // Requests the scheduler thread holds that wait for a sequence (its queue, those waiting for a
  // lookup included): recounted after each admission, raised when the inbox is taken.
  std::int32_t waiting_in_thread_ = 0;
  // Sequences free for requests when the scheduler thread last admitted: that many requests in
  // the inbox start at once, so they do not count against max_queued.
  std::int32_t open_slots_ = 0;
  bool fetch_ready_ = false;      // a lookup finished since the loop last looked
  bool draw_ready_ = false;       // a masked draw finished since the loop last looked
  std::deque<std::function<void()>> commands_;
  SchedulerStats stats_;
  std::uint64_t next_id_ = 0;
  bool stopping_ = false;

  // After mutex_ and wake_, which its worker signals: destroyed (joined) before them.
  std::unique_ptr<MaskedDraws> draws_;
  std::thread thread_;  // last: starts after every member above is constructed
};

}  // namespace prefixd::scheduler
