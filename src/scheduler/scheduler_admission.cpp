// prefixd scheduler — admission: queued requests into free sequences when the cache says their
// prompt fits, the cache's answer (a prefix, or a wait for one) applied to the request.
#include "scheduler/scheduler_impl.h"

#include <algorithm>
#include <spdlog/spdlog.h>

namespace prefixd::scheduler {

using engine::BatchToken;
using engine::DecodeStatus;
using engine::Token;

// Moves queued requests into free sequences while their prompts fit in the free cells.
void Scheduler::Impl::admit() {
  remote_waits_->plan(queue_, seconds_per_prompt_token_);
  remote_waits_->collect(queue_);
  while (!queue_.empty() && !free_seqs_.empty()) {
    Queued& next = queue_.front();
    if (next.stream->cancelled()) {
      finish_unstarted(next, FinishReason::cancelled, "");
      queue_.pop_front();
      continue;
    }
    // The cache decides whether the prompt fits beside what it holds and what running requests
    // hold, freeing idle cells to make room; an idle server admits whatever it can.
    const std::int64_t need = static_cast<std::int64_t>(next.request.prompt.size()) + 1;
    if (!cache_->make_room(running_cells(), need) && !active_.empty()) break;
    Queued admitted = std::move(next);
    queue_.pop_front();
    start(std::move(admitted));
  }
  std::lock_guard lock(mutex_);
  waiting_in_thread_ = static_cast<std::int32_t>(queue_.size() + remote_waits_->size());
  open_slots_ = queue_.empty() ? static_cast<std::int32_t>(free_seqs_.size()) : 0;
  stats_.queued = static_cast<std::int32_t>(inbox_.size()) + waiting_in_thread_;
  stats_.running = static_cast<std::int32_t>(active_.size());
}

// Cells the running requests' sequences hold or will hold for the tokens they have now (their
// prompt and sampled tokens, and one for the next).
std::int64_t Scheduler::Impl::running_cells() const {
  std::int64_t total = 0;
  for (const auto& a : active_) total += static_cast<std::int64_t>(a->tokens.size()) + 1;
  return total;
}

void Scheduler::Impl::start(Queued queued) {
  // A sampler that cannot be built (a grammar the engine refuses) fails the request, not the
  // scheduler; the API checks grammars first, so this is the last line of defence.
  std::unique_ptr<engine::Sampler> sampler = std::move(queued.sampler);
  try {
    if (!sampler) sampler = engine_.make_sampler(queued.request.sampling);
  } catch (const std::exception& e) {
    finish_unstarted(queued, FinishReason::error, e.what());
    return;
  }
  auto a = std::make_unique<Active>();
  a->id = queued.id;
  a->stream = std::move(queued.stream);
  a->submitted = queued.submitted;
  a->started = Clock::now();
  a->seq = free_seqs_.back();
  free_seqs_.pop_back();
  a->tokens = queued.request.prompt;
  a->n_prompt = static_cast<std::int32_t>(a->tokens.size());
  const std::int32_t room = engine_.context_size() - a->n_prompt;
  a->max_new = queued.request.max_tokens < 0 ? room : std::min(queued.request.max_tokens, room);
  a->sampler = std::move(sampler);
  a->text = TextStream(queued.request.stop);
  a->request = std::move(queued.request);
  const std::shared_ptr<cache::RemoteFetch> fetched = std::move(queued.fetch);
  engine_.remove_sequence(a->seq, 0, -1);
  if (a->uses_cache()) {
    sessions_.observe_prompt(a->session(), a->tokens);
    observe_prompt_inputs(*a);
    const auto acquire_start = Clock::now();
    const cache::Acquisition got = cache_->acquire(cache_key(a->request.cache), a->tokens, a->seq, fetched.get());
    spdlog::trace("request {}: cache acquire took {:.1f} ms", a->id,
                  std::chrono::duration<double, std::milli>(Clock::now() - acquire_start).count());
    apply(*a, got);
  } else {
    apply(*a, cache_->bypass(a->request.cache.scope));
  }
  active_.push_back(std::move(a));
}

// What the cache put into the request's sequence (or that it waits for another request).
void Scheduler::Impl::apply(Active& a, const cache::Acquisition& got) {
  a.waiting = got.waiting;
  a.n_past = got.reused;
  CacheReport report{got.outcome, got.reused, a.n_prompt - got.reused, got.tier, got.in_session,
                     std::move(a.cache.changed_inputs)};
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
  for (const cache::Resolved& r : cache_->poll()) {
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
