#include "scheduler/scheduler_impl.h"

#include "cache/prefix_cache.h"
#include "cache/request_key.h"

#include <algorithm>
#include <format>
#include <future>
#include <iterator>
#include <spdlog/spdlog.h>

namespace prefixd::scheduler {

const char* submit_error_message(SubmitError error) {
  switch (error) {
    case SubmitError::queue_full: return "the server is busy: the request queue is full, retry later";
    case SubmitError::prompt_too_long: return "the prompt does not fit in the context";
    case SubmitError::empty_prompt: return "the prompt is empty";
    case SubmitError::shutting_down: return "the server is shutting down";
  }
  return "request refused";
}


Scheduler::Impl::Impl(engine::Engine& engine, SchedulerOptions options, engine::Engine* drafter)
    : engine_(engine), options_(options) {
  // The engine's window pin (if any) is its last sequence id and the cache's alone.
  const engine::SeqId pin = engine_.model().window_pin;
  const std::int32_t usable = pin >= 0 ? pin : engine_.sequence_count();
  options_.n_slots = std::clamp(options_.n_slots, 1, usable);
  // The cache needs at least one holder and a scratch sequence beyond the slots.
  const std::int32_t spare = usable - options_.n_slots;
  options_.cache_holders = spare >= 2 ? std::clamp(options_.cache_holders, 0, spare - 1) : 0;
  if (options_.cache_holders == 0) options_.cache.enabled = false;
  std::vector<engine::SeqId> holders;
  for (engine::SeqId s = 0; s < options_.cache_holders; ++s) holders.push_back(options_.n_slots + s);
  const engine::SeqId scratch = options_.cache.enabled ? options_.n_slots + options_.cache_holders : -1;
  if (engine_.deterministic()) options_.cache.checkpoint_alignment = engine_.rowwise_rows();
  packing_ = options_.prefill_packing.value_or(engine_.model().on_accelerator ? PrefillPacking::on
                                                                                : PrefillPacking::bounded);
  static constexpr const char* kPackingNames[] = {"off", "bounded", "on"};
  spdlog::info("prefill packing: {} ({})", kPackingNames[static_cast<int>(packing_)],
               options_.prefill_packing ? "--prefill-packing"
               : engine_.model().on_accelerator ? "the default with layers on a GPU"
                                                : "the default on the CPU");
  set_up_speculation(drafter);
  cache_ = std::make_unique<cache::PrefixCache>(engine_, options_.cache, std::move(holders), scratch,
                                                options_.cache.enabled ? pin : -1);
  if (options_.kv_events.sink) operations().record_kv_events(options_.kv_events.scopes);
  draws_ = std::make_unique<MaskedDraws>([this] {
    {
      std::lock_guard lock(mutex_);
      draw_ready_ = true;
    }
    wake_.notify_all();
  });
  free_seqs_.reserve(static_cast<size_t>(options_.n_slots));
  for (engine::SeqId s = options_.n_slots - 1; s >= 0; --s) free_seqs_.push_back(s);
  open_slots_ = options_.n_slots;
  stats_.kv_cells_total = engine_.context_size();
  thread_ = std::thread([this] { run(); });
}

cache::RequestLife& Scheduler::Impl::life() { return *cache_; }
const cache::RequestLife& Scheduler::Impl::life() const { return *cache_; }
cache::CacheAdmin& Scheduler::Impl::admin() { return *cache_; }
cache::CacheOperations& Scheduler::Impl::operations() { return *cache_; }
const cache::CacheOperations& Scheduler::Impl::operations() const { return *cache_; }

Scheduler::Impl::~Impl() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

// A ticket's lookup completed. Tickets live in queue_ only, which shutdown() empties before the
// thread ends: no call comes after that (request_life.h).
void Scheduler::Impl::on_lookup_done() {
  {
    std::lock_guard lock(mutex_);
    fetch_ready_ = true;
  }
  wake_.notify_all();
}

std::expected<std::shared_ptr<RequestStream>, SubmitError> Scheduler::Impl::submit(GenerationRequest request) {
  // A grammar's sampler is built here, outside the lock and off the scheduler thread. One that
  // cannot be built is left to start(), which fails the request with the engine's reason.
  std::unique_ptr<engine::Sampler> sampler;
  if (request.sampling.grammar) {
    try {
      sampler = engine_.make_sampler(request.sampling);
    } catch (const std::exception&) {
      sampler = nullptr;
    }
  }
  for (const engine::AdapterScale& a : request.adapters) {
    if (a.id < 0 || static_cast<std::size_t>(a.id) >= engine_.model().adapters.size() || a.scale == 0.0f) {
      throw std::invalid_argument(std::format("submit: no LoRA adapter {} to apply at {}", a.id, a.scale));
    }
  }
  // An image's positions are computed in one piece: the cache never resumes inside one.
  request.cache.unbroken.clear();
  for (const PromptImage& image : request.images) request.cache.unbroken.push_back({image.begin, image.end()});
  std::lock_guard lock(mutex_);
  if (request.prompt.empty()) return reject(SubmitError::empty_prompt);
  if (static_cast<std::int32_t>(request.prompt.size()) > max_prompt_tokens()) {
    return reject(SubmitError::prompt_too_long);
  }
  // An embedding whose prompt is computed in one call reads and leaves nothing in the cache.
  if (request.embed == EmbedMode::whole_prompt) {
    if (static_cast<std::int32_t>(request.prompt.size()) > engine_.batch_size()) return reject(SubmitError::prompt_too_long);
    request.cache.enabled = false;
  }
  if (stopping_) return reject(SubmitError::shutting_down);
  // A burst into an idle server fills its free slots first: only requests beyond them queue.
  if (static_cast<std::int32_t>(inbox_.size()) + waiting_in_thread_ >= options_.max_queued + open_slots_) {
    return reject(SubmitError::queue_full);
  }
  auto stream = std::make_shared<RequestStream>();
  inbox_.push_back(Queued{.id = ++next_id_, .request = std::move(request), .stream = stream, .submitted = Clock::now(),
                          .sampler = std::move(sampler)});
  ++stats_.requests_total;
  stats_.queued = static_cast<std::int32_t>(inbox_.size()) + waiting_in_thread_;
  wake_.notify_all();
  return stream;
}

SchedulerStats Scheduler::Impl::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats out = stats_;
  out.image_embedding_capacity_bytes = options_.image_embedding_bytes;
  return out;
}

bool Scheduler::Impl::run_on_thread(const std::function<void()>& job) {
  std::packaged_task<void()> task(job);
  std::future<void> result = task.get_future();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    commands_.emplace_back([&task] { task(); });
  }
  wake_.notify_all();
  result.get();
  return true;
}

cache::ResetReport Scheduler::Impl::reset_cache(const std::optional<cache::ScopeId>& scope) {
  cache::ResetReport report;
  run_on_thread([&] {
    report = scope ? operations().reset_scope(*scope) : operations().reset();
    if (drafter_ && scope) drafter_->cache().reset_scope(*scope);
    if (drafter_ && !scope) drafter_->cache().reset();
    sessions_.forget_kept(scope);
    for (auto& kept : slot_kept_) {
      if (kept && (!scope || kept->key.scope == *scope)) kept.reset();
    }
    forget_outputs(scope);
  });
  return report;
}

bool Scheduler::Impl::ask_cache(const std::function<void(cache::CacheAdmin&)>& operation) {
  return run_on_thread([&] { operation(admin()); });
}

std::expected<std::optional<SessionPrompt>, SubmitError> Scheduler::Impl::session_prompt(const cache::ScopeId& scope, const std::string& session) {
  std::optional<SessionPrompt> found;
  if (!run_on_thread([&] { found = sessions_.latest_kept(scope, session); })) return std::unexpected(SubmitError::shutting_down);
  return found;
}

std::expected<std::vector<SlotState>, SubmitError> Scheduler::Impl::slots() {
  std::vector<SlotState> out;
  const bool ran = run_on_thread([&] {
    for (std::int32_t id = 0; id < options_.n_slots; ++id) {
      SlotState slot{.id = id};
      if (const auto& kept = slot_kept_[static_cast<std::size_t>(id)]) slot.kept_tokens = static_cast<std::int32_t>(kept->tokens.size());
      for (const auto& a : active_) {
        if (a->seq != id) continue;
        slot.task = a->id;
        slot.processing = !a->warming;
        slot.prompt_tokens = a->n_prompt;
        slot.computed = a->n_past;
        slot.generated = a->generated;
        slot.max_new = a->max_new;
        slot.speculative = a->drafting.has_value();
      }
      out.push_back(slot);
    }
  });
  if (!ran) return std::unexpected(SubmitError::shutting_down);
  return out;
}

std::expected<std::optional<SessionPrompt>, SubmitError> Scheduler::Impl::slot_prompt(std::int32_t id) {
  std::optional<SessionPrompt> found;
  if (id < 0 || id >= options_.n_slots) return found;
  if (!run_on_thread([&] { found = slot_kept_[static_cast<std::size_t>(id)]; })) return std::unexpected(SubmitError::shutting_down);
  return found;
}

std::expected<std::int32_t, SubmitError> Scheduler::Impl::erase_slot(std::int32_t id) {
  std::int32_t erased = 0;
  if (id < 0 || id >= options_.n_slots) return erased;
  const bool ran = run_on_thread([&] {
    std::optional<SessionPrompt>& kept = slot_kept_[static_cast<std::size_t>(id)];
    if (!kept) return;
    // What another slot's last request shares with it stays: that slot did not ask to be erased.
    std::int32_t shared = 0;
    for (std::int32_t other = 0; other < options_.n_slots; ++other) {
      const auto& theirs = slot_kept_[static_cast<std::size_t>(other)];
      if (other == id || !theirs || theirs->key.namespace_digest != kept->key.namespace_digest) continue;
      shared = std::max(shared, cache::common_prefix(theirs->tokens, kept->tokens));
    }
    admin().forget(kept->key, kept->tokens, shared);
    erased = static_cast<std::int32_t>(kept->tokens.size());
    kept.reset();
  });
  if (!ran) return std::unexpected(SubmitError::shutting_down);
  return erased;
}

std::unexpected<SubmitError> Scheduler::Impl::reject(SubmitError error) {
  ++stats_.requests_rejected;
  return std::unexpected(error);
}

void Scheduler::Impl::run() {
  StepClock::Turn ended;  // the turn before, recorded under this turn's lock (no lock of its own)
  bool ended_sampled = false;
  while (true) {
    std::deque<std::function<void()>> commands;
    bool has_work = false;
    {
      // The lock guards only what submitters share (the inbox, commands, counters): the cache's
      // work below — disk reads, demotions, lookups — never holds it, so submit() and /metrics
      // never wait behind it.
      std::unique_lock lock(mutex_);
      record_turn(ended, ended_sampled);
      const Clock::duration events_due =
          kv_events_dirty_ ? std::max<Clock::duration>(last_kv_events_ + options_.kv_events.interval - Clock::now(), {})
                           : Clock::duration(std::chrono::seconds(1));
      wake_.wait_for(lock, lookup_wait_limit(std::min<Clock::duration>(std::chrono::seconds(1), events_due)), [this] {
        return stopping_ || !inbox_.empty() || admissible_queued() || runnable() || !commands_.empty() ||
               fetch_ready_ || draw_ready_;
      });
      if (stopping_) break;
      step_clock_.begin_turn();
      turn_sampled_ = false;
      commands.swap(commands_);
      // Still waiting, now on this thread's side: submit() keeps counting them against the limit.
      waiting_in_thread_ += static_cast<std::int32_t>(inbox_.size());
      std::ranges::move(inbox_, std::back_inserter(queue_));
      inbox_.clear();
      fetch_ready_ = false;
      draw_ready_ = false;
      // A step: the turn has something to run, not only a wake-up to look (a timeout, KV events due).
      has_work = !commands.empty() || !queue_.empty() || !active_.empty();
    }
    {
      // Commands are the cache's admin face and its reset, mostly: counted as cache work.
      const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
      for (auto& command : commands) command();
    }
    // The cache's idle work, before admission so that nothing expired is reused: expiry when due,
    // and, when nothing runs (requests that bypass the cache hold cells it does not know of),
    // compaction. Finished requests leave holes, and attention runs up to the highest cell in use;
    // rewriting the entries from cell 0 while requests run would stall all of them for the copy,
    // and a make bench run that did it gained nothing over compacting only when idle
    // (docs/design.md).
    std::int64_t compacted = 0;
    {
      const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
      compacted = life().tick(active_.empty());
      if (drafter_) drafter_->tick();
    }
    if (compacted > 0) spdlog::trace("cache: {} idle cells rewritten from the start of the context", compacted);
    admit();
    drop_cancelled();
    take_resolved_prefixes();
    take_masked_draws();
    step();
    publish_kv_events();
    ended = step_clock_.end_turn(has_work || compacted > 0);
    ended_sampled = turn_sampled_;
  }
  shutdown();
}

void Scheduler::Impl::record_turn(const StepClock::Turn& turn, bool sampled) {
  stats_.idle += turn.waited;
  if (!turn.step) return;
  stats_.steps.observe(turn.step->total());
  for (const StepPhase phase : kStepPhases) stats_.step_phases[static_cast<size_t>(phase)].observe((*turn.step)[phase]);
  stats_.decode_steps_total += sampled ? 1 : 0;
}

void SchedulerStats::StepHistogram::observe(StepTimes::Duration took) {
  const double seconds = std::chrono::duration<double>(took).count();
  for (size_t i = 0; i < kStepBounds.size(); ++i) buckets[i] += seconds <= kStepBounds[i] ? 1 : 0;
  count += 1;
  sum += took;
}

void Scheduler::Impl::publish_kv_events() {
  if (!options_.kv_events.sink) return;
  const auto now = Clock::now();
  kv_events_dirty_ = true;
  if (now - last_kv_events_ < options_.kv_events.interval) return;  // the wait above comes back for it
  const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
  last_kv_events_ = now;
  kv_events_dirty_ = false;
  std::vector<cache::KvEvent> events = operations().take_kv_events();
  if (!events.empty()) options_.kv_events.sink(std::move(events));
}

void Scheduler::Impl::shutdown() {
  for (size_t i = active_.size(); i-- > 0;) {
    if (active_[i]->warming) end_warmup(i, false);
  }
  while (!active_.empty()) finish(active_.size() - 1, FinishReason::cancelled, "the server is shutting down");
  for (Queued& q : queue_) finish_unstarted(q, FinishReason::cancelled, "the server is shutting down");
  queue_.clear();  // lookups still in flight are dropped uncounted, as the server goes
  std::lock_guard lock(mutex_);
  for (Queued& q : inbox_) finish_unstarted(q, FinishReason::cancelled, "the server is shutting down");
  inbox_.clear();
}

Scheduler::Scheduler(engine::Engine& engine, SchedulerOptions options, engine::Engine* drafter)
    : impl_(std::make_unique<Impl>(engine, options, drafter)) {}
Scheduler::~Scheduler() = default;

std::expected<std::shared_ptr<RequestStream>, SubmitError> Scheduler::submit(GenerationRequest request) {
  return impl_->submit(std::move(request));
}
SchedulerStats Scheduler::stats() const { return impl_->stats(); }
std::int32_t Scheduler::max_prompt_tokens() const { return impl_->max_prompt_tokens(); }
cache::CacheStats Scheduler::cache_stats() const { return impl_->cache_stats(); }
std::optional<cache::CacheStats> Scheduler::draft_cache_stats() const { return impl_->draft_cache_stats(); }
const cache::CacheConfig& Scheduler::cache_config() const { return impl_->cache_config(); }
cache::ResetReport Scheduler::reset_cache(const std::optional<cache::ScopeId>& scope) {
  return impl_->reset_cache(scope);
}
bool Scheduler::ask_cache(const std::function<void(cache::CacheAdmin&)>& operation) { return impl_->ask_cache(operation); }
std::expected<std::optional<SessionPrompt>, SubmitError> Scheduler::session_prompt(const cache::ScopeId& scope, const std::string& session) {
  return impl_->session_prompt(scope, session);
}

std::expected<std::vector<SlotState>, SubmitError> Scheduler::slots() { return impl_->slots(); }

std::expected<std::optional<SessionPrompt>, SubmitError> Scheduler::slot_prompt(std::int32_t id) {
  return impl_->slot_prompt(id);
}

std::expected<std::int32_t, SubmitError> Scheduler::erase_slot(std::int32_t id) { return impl_->erase_slot(id); }

std::int32_t Scheduler::slot_count() const { return impl_->slot_count(); }

}  // namespace prefixd::scheduler
