// prefixd scheduler — admission: queued requests' tickets (cache/request_life.h) offered free
// sequences in arrival order, and the cache's answer (a prefix, or a wait for one) applied to the
// request.
#include "scheduler/scheduler_impl.h"

#include <algorithm>
#include <spdlog/spdlog.h>

namespace prefixd::scheduler {

using engine::BatchToken;
using engine::DecodeStatus;
using engine::Token;

// Opens the tickets of newly queued requests: their shared-tier lookups start now, not when they
// reach the head of the queue. A requeued request (requeue) gets a new one.
void Scheduler::Impl::open_tickets() {
  const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
  for (Queued& q : queue_) {
    if (q.ticket || q.stream->cancelled()) continue;
    q.ticket = q.request.cache.enabled
                   ? life().open(cache_key(q.request.cache), q.request.prompt, seconds_per_prompt_token_,
                                 [this] { on_lookup_done(); })
                   : life().open_bypass(q.request.cache.scope);
  }
}

// Offers free sequences to the queued requests in arrival order. The cache answers for each: it
// took the sequence; its lookup is still in flight (it stays in place, and those behind it go
// first); or the prompt does not fit, which stops admission (an idle server admits whatever it
// can: the cache frees idle cells to make room, counting what the running requests hold).
void Scheduler::Impl::admit() {
  open_tickets();
  auto it = queue_.begin();
  while (it != queue_.end() && !free_seqs_.empty()) {
    Queued& next = *it;
    next.lookup_deadline.reset();
    if (next.stream->cancelled()) {
      if (next.ticket) {
        const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
        life().abandon(*next.ticket);
      }
      finish_unstarted(next, FinishReason::cancelled, "");
      it = queue_.erase(it);
      continue;
    }
    if (!has_sampler(next)) {
      it = queue_.erase(it);
      continue;
    }
    const cache::Room room{.running = running_cells(),
                           .need = static_cast<std::int64_t>(next.request.prompt.size()) + 1,
                           .nothing_running = active_.empty()};
    const auto admit_start = Clock::now();
    const cache::Admission got = [&] {
      const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
      return life().admit(*next.ticket, free_seqs_.back(), room);
    }();
    if (got.kind == cache::Admission::Kind::lookup_pending) {
      next.lookup_deadline = got.deadline;
      ++it;
      continue;
    }
    if (got.kind == cache::Admission::Kind::full) {
      const std::uint64_t head = next.id;
      if (!preempt_for(next)) break;
      it = std::ranges::find(queue_, head, &Queued::id);  // the queue changed around it
      continue;
    }
    if (next.request.cache.enabled) {
      spdlog::trace("request {}: cache admission took {:.1f} ms", next.id,
                    std::chrono::duration<double, std::milli>(Clock::now() - admit_start).count());
    }
    Queued admitted = std::move(next);
    it = queue_.erase(it);
    start(std::move(admitted), got.acquisition);
  }
  // The queue ran out with sequences left: only requests waiting for their lookup remain.
  const bool only_lookups_left = it == queue_.end();
  std::lock_guard lock(mutex_);
  waiting_in_thread_ = static_cast<std::int32_t>(queue_.size());
  open_slots_ = only_lookups_left ? static_cast<std::int32_t>(free_seqs_.size()) : 0;
  stats_.queued = static_cast<std::int32_t>(inbox_.size()) + waiting_in_thread_;
  stats_.running = static_cast<std::int32_t>(active_.size());
  stats_.kv_cells_running = 0;
  for (const auto& a : active_) stats_.kv_cells_running += a->n_past;
  stats_.kv_cells_total = engine_.context_size();
}

// A request whose prompt the cache mostly holds should not wait minutes behind a cold prefill
// that holds the cells it needs: a running prefill with at least this many times more left to
// compute than the head of the queue would compute gives way. What it computed goes to the cache
// (donated like a finished request's), so it resumes where it stopped, losing no computed token.
constexpr std::int64_t kPreemptionRatio = 4;

// The queue's head does not fit: a running cold prefill gives way to it when the head has far less
// to compute, the head then fits, and the prefill has not been held back long enough already
// (Active::held_back_too_long, the bound of the prefill order). The one with the most left goes.
bool Scheduler::Impl::preempt_for(Queued& head) {
  if (!head.ticket) return false;
  const auto need = static_cast<std::int64_t>(head.request.prompt.size()) + 1;
  const std::int64_t head_work = static_cast<std::int64_t>(head.request.prompt.size()) - life().reusable(*head.ticket);
  std::optional<std::size_t> victim;
  for (std::size_t i = 0; i < active_.size(); ++i) {
    const Active& a = *active_[i];
    if (a.warming || a.waiting || !a.uses_cache() || a.generated > 0 || a.n_past >= prefill_end(a)) continue;
    if (a.prompt_left() < kPreemptionRatio * head_work || a.held_back_too_long()) continue;
    if (!victim || a.prompt_left() > active_[*victim]->prompt_left()) victim = i;
  }
  if (!victim) return false;
  // Only when it makes room: the head fits beside the others once the victim's cells are the
  // cache's to demote.
  const std::int64_t others = running_cells() - static_cast<std::int64_t>(active_[*victim]->tokens.size()) - 1;
  if (others + need > engine_.context_size()) return false;
  active_[*victim]->passed_over_tokens += head_work;
  preempt(*victim, head.id);
  return true;
}

// The running request gives way: its computed prefix goes to the cache, its sequence is freed, and
// it waits right behind `behind` with a new ticket, resuming from the cache when admitted again.
void Scheduler::Impl::preempt(std::size_t index, std::uint64_t behind) {
  std::unique_ptr<Active> a = std::move(active_[index]);
  active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(index));
  spdlog::debug("request {}: its prefill gives way at {} of {} prompt tokens", a->id, a->n_past, a->n_prompt);
  end_sequence(*a, true);
  free_seqs_.push_back(a->seq);
  a->step_share.leave(step_clock_);
  Queued q{a->id, std::move(a->request), std::move(a->stream), a->submitted};
  q.passed_over_tokens = a->passed_over_tokens;
  q.step_share = a->step_share;
  {
    const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
    q.ticket = life().open(cache_key(q.request.cache), q.request.prompt, seconds_per_prompt_token_,
                           [this] { on_lookup_done(); });
  }
  const auto at = std::ranges::find(queue_, behind, &Queued::id);
  queue_.insert(at == queue_.end() ? at : std::next(at), std::move(q));
  std::lock_guard lock(mutex_);
  stats_.prefill_preemptions_total += 1;
  stats_.running = static_cast<std::int32_t>(active_.size());
}

// A sampler that cannot be built (a grammar the engine refuses) fails the request, not the
// scheduler, before the cache is asked for anything; the API checks grammars first, so this is
// the last line of defence. A request keeps its sampler while it waits.
bool Scheduler::Impl::has_sampler(Queued& q) {
  if (q.sampler) return true;
  try {
    q.sampler = engine_.make_sampler(q.request.sampling);
    return true;
  } catch (const std::exception& e) {
    finish_unstarted(q, FinishReason::error, e.what());
    return false;
  }
}

// Whether a queued request could be admitted now: one the cache did not last answer is waiting for
// its lookup (those wake the loop when the lookup completes, or by their deadline).
bool Scheduler::Impl::admissible_queued() const {
  return std::ranges::any_of(queue_, [](const Queued& q) { return !q.lookup_deadline; });
}

// How long the loop may sleep before a lookup's deadline passes (at most `limit`).
Clock::duration Scheduler::Impl::lookup_wait_limit(Clock::duration limit) const {
  const auto now = Clock::now();
  for (const Queued& q : queue_) {
    if (!q.lookup_deadline) continue;
    limit = std::min<Clock::duration>(limit, std::max(*q.lookup_deadline - now, Clock::duration::zero()));
  }
  return limit;
}

// Cells the running requests' sequences hold or will hold for the tokens they have now (their
// prompt and sampled tokens, and one for the next).
std::int64_t Scheduler::Impl::running_cells() const {
  std::int64_t total = 0;
  for (const auto& a : active_) total += static_cast<std::int64_t>(a->tokens.size()) + 1;
  return total;
}

// The request now holds the sequence the cache admitted it into (free_seqs_.back()).
void Scheduler::Impl::start(Queued queued, const cache::Acquisition& got) {
  auto a = std::make_unique<Active>();
  a->id = queued.id;
  a->stream = std::move(queued.stream);
  a->submitted = queued.submitted;
  a->started = Clock::now();
  a->last_step = step_serial_;  // behind every request that ran before it came (choose_adapters)
  a->seq = free_seqs_.back();
  free_seqs_.pop_back();
  a->tokens = queued.request.prompt;
  a->n_prompt = static_cast<std::int32_t>(a->tokens.size());
  const std::int32_t room = engine_.context_size() - a->n_prompt;
  a->max_new = queued.request.max_tokens < 0 ? room : std::min(queued.request.max_tokens, room);
  a->sampler = std::move(queued.sampler);
  a->passed_over_tokens = queued.passed_over_tokens;
  a->step_share = queued.step_share;
  a->step_share.join(step_clock_);
  a->text = TextStream(queued.request.stop, queued.request.indent_floor);
  a->request = std::move(queued.request);
  start_drafting(*a);
  if (a->uses_cache()) {
    sessions_.observe_prompt(a->session(), a->tokens);
    observe_prompt_inputs(*a);
  }
  apply(*a, got);
  active_.push_back(std::move(a));
}

// What the cache put into the request's sequence (or that it waits for another request).
void Scheduler::Impl::apply(Active& a, const cache::Acquisition& got) {
  a.waiting = got.waiting;
  a.n_past = got.reused;
  CacheReport report{got.outcome, got.reused, a.n_prompt - got.reused, got.tier, got.in_session,
                     std::move(a.cache.changed_inputs)};
  report.shifted_tokens = got.shifted;
  report.seconds_saved = seconds_per_prompt_token_ * got.reused;
  if (!got.waiting && got.outcome != cache::Outcome::bypass) {
    std::lock_guard lock(mutex_);
    stats_.prefill_seconds_saved += report.seconds_saved;
  }
  report.images = static_cast<std::int32_t>(a.request.images.size());
  report.images_cached = static_cast<std::int32_t>(
      std::ranges::count_if(a.request.images, [&](const PromptImage& image) { return image.end() <= got.reused; }));
  report.image_embeddings_reused = a.cache.image_embeddings_reused;
  report.images_encoded = a.cache.images_encoded;
  a.cache = std::move(report);
  if (!a.waiting) report_progress(a);
}

void Scheduler::Impl::report_progress(Active& a) { report_progress(a, a.n_past); }

void Scheduler::Impl::report_progress(Active& a, std::int32_t processed) {
  if (a.warming || processed > a.n_prompt) return;
  const StepClock::Scope in_output = step_clock_.enter(StepPhase::output);
  StreamEvent event{.kind = StreamEvent::Kind::progress};
  event.progress = PromptProgress{
      .total = a.n_prompt,
      .cached = a.cache.cached_tokens,
      .processed = processed,
      .elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - a.started).count()};
  a.stream->push(std::move(event));
}

// A named session's template, kwargs, tools or tool_choice that changed since its previous
// request: named in the response, counted and traced, since they explain a prompt that diverges
// before its messages do. They never keep the cache from matching the tokens that stayed equal.
void Scheduler::Impl::observe_prompt_inputs(Active& a) {
  if (a.request.cache.session_key.empty()) return;
  a.cache.changed_inputs = sessions_.changed_inputs(a.session(), a.request.cache.prompt_inputs);
  if (a.cache.changed_inputs.empty()) return;
  if (spdlog::should_log(spdlog::level::trace)) {
    std::string names;
    for (const std::string& name : a.cache.changed_inputs) names += (names.empty() ? "" : ", ") + name;
    spdlog::trace("request {}: {} changed since the session's previous request", a.id, names);
  }
  std::lock_guard lock(mutex_);
  stats_.prompt_input_changes_total += 1;
}

// Requests that waited for a prefix another request was computing now hold it.
void Scheduler::Impl::take_resolved_prefixes() {
  const auto resolved = [this] {
    const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
    return life().take_resolved();
  }();
  for (const cache::Resolved& r : resolved) {
    for (auto& a : active_) {
      if (a->seq == r.seq && a->waiting) apply(*a, r.acquisition);
    }
  }
}

void Scheduler::Impl::drop_cancelled() {
  for (size_t i = 0; i < active_.size();) {
    if (active_[i]->stream->cancelled() && !active_[i]->warming) {
      finish(i, FinishReason::cancelled, "");
    } else {
      ++i;
    }
  }
  // A queued request leaves as soon as its client does, not when a sequence frees up: it may wait
  // behind long work, and its place in the queue (and its ticket's lookup) serves nobody.
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (!it->stream->cancelled()) {
      ++it;
      continue;
    }
    if (it->ticket) {
      const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
      life().abandon(*it->ticket);
    }
    finish_unstarted(*it, FinishReason::cancelled, "");
    it = queue_.erase(it);
  }
}

void Scheduler::Impl::finish_unstarted(Queued& q, FinishReason reason, std::string error) {
  StreamEvent done;
  done.kind = StreamEvent::Kind::done;
  done.finish = reason;
  done.error = std::move(error);
  done.usage.prompt_tokens = static_cast<std::int32_t>(q.request.prompt.size());
  done.cache.outcome = cache::Outcome::bypass;
  q.stream->push(std::move(done));
}

}  // namespace prefixd::scheduler
