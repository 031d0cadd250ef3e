#include "scheduler/scheduler.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <future>
#include <iterator>
#include <optional>
#include <span>
#include <utility>
#include <spdlog/spdlog.h>

#include "scheduler/logprobs.h"
#include "scheduler/remote_waits.h"
#include "scheduler/scheduler_internal.h"
#include "scheduler/session_memory.h"

namespace prefixd::scheduler {
namespace {

using engine::BatchToken;
using engine::DecodeStatus;
using engine::Token;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

const char* submit_error_message(SubmitError error) {
  switch (error) {
    case SubmitError::queue_full: return "the server is busy: the request queue is full, retry later";
    case SubmitError::prompt_too_long: return "the prompt does not fit in the context";
    case SubmitError::empty_prompt: return "the prompt is empty";
    case SubmitError::shutting_down: return "the server is shutting down";
  }
  return "request refused";
}

class Scheduler::Impl {
 public:
  Impl(engine::Engine& engine, SchedulerOptions options) : engine_(engine), options_(options) {
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
    pack_prefills_ = options_.pack_prefills.value_or(engine_.model().on_accelerator);
    cache_ = std::make_unique<cache::PrefixCache>(engine_, options_.cache, std::move(holders), scratch,
                                                  options_.cache.enabled ? pin : -1);
    remote_waits_ = std::make_unique<RemoteWaits>(*cache_, [this] {
      {
        std::lock_guard lock(mutex_);
        fetch_ready_ = true;
      }
      wake_.notify_all();
    });
    free_seqs_.reserve(static_cast<size_t>(options_.n_slots));
    for (engine::SeqId s = options_.n_slots - 1; s >= 0; --s) free_seqs_.push_back(s);
    thread_ = std::thread([this] { run(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
    remote_waits_->disconnect();
  }

  std::expected<std::shared_ptr<RequestStream>, SubmitError> submit(GenerationRequest request) {
    std::lock_guard lock(mutex_);
    if (request.prompt.empty()) return reject(SubmitError::empty_prompt);
    if (static_cast<std::int32_t>(request.prompt.size()) > max_prompt_tokens()) {
      return reject(SubmitError::prompt_too_long);
    }
    if (stopping_) return reject(SubmitError::shutting_down);
    if (static_cast<std::int32_t>(inbox_.size()) + waiting_in_thread_ >= options_.max_queued) {
      return reject(SubmitError::queue_full);
    }
    auto stream = std::make_shared<RequestStream>();
    inbox_.push_back(Queued{++next_id_, std::move(request), stream, Clock::now()});
    ++stats_.requests_total;
    stats_.queued = static_cast<std::int32_t>(inbox_.size()) + waiting_in_thread_;
    wake_.notify_all();
    return stream;
  }

  SchedulerStats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  cache::CacheStats cache_stats() const { return cache_->stats(); }
  const cache::CacheConfig& cache_config() const { return cache_->config(); }

  cache::ResetReport reset_cache(const std::optional<cache::ScopeId>& scope) {
    std::packaged_task<cache::ResetReport()> task(
        [this, &scope] { return scope ? cache_->reset_scope(*scope) : cache_->reset(); });
    std::future<cache::ResetReport> result = task.get_future();
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return {};
      commands_.emplace_back([&task] { task(); });
    }
    wake_.notify_all();
    return result.get();
  }

  bool with_cache(const std::function<void(cache::PrefixCache&)>& operation) {
    std::packaged_task<void()> task([this, &operation] { operation(*cache_); });
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

  // One cell is kept free for the first generated token.
  std::int32_t max_prompt_tokens() const { return engine_.context_size() - 1; }

 private:
  std::unexpected<SubmitError> reject(SubmitError error) {
    ++stats_.requests_rejected;
    return std::unexpected(error);
  }

  void run() {
    auto next_expiry = Clock::now();
    while (true) {
      std::deque<std::function<void()>> commands;
      {
        // The lock guards only what submitters share (the inbox, commands, counters): the cache's
        // work below — disk reads, demotions, lookups — never holds it, so submit() and /metrics
        // never wait behind it.
        std::unique_lock lock(mutex_);
        wake_.wait_for(lock, remote_waits_->wait_limit(std::chrono::seconds(1)), [this] {
          return stopping_ || !inbox_.empty() || !queue_.empty() || !active_.empty() || !commands_.empty() || fetch_ready_;
        });
        if (stopping_) break;
        commands.swap(commands_);
        // Still waiting, now on this thread's side: submit() keeps counting them against the limit.
        waiting_in_thread_ += static_cast<std::int32_t>(inbox_.size());
        std::ranges::move(inbox_, std::back_inserter(queue_));
        inbox_.clear();
        fetch_ready_ = false;
      }
      for (auto& command : commands) command();
      if (Clock::now() >= next_expiry) {
        cache_->expire();
        next_expiry = Clock::now() + std::chrono::seconds(1);
      }
      admit();
      drop_cancelled();
      take_resolved_prefixes();
      step();
      compact_if_due();
    }
    shutdown();
  }

  // Finished requests leave holes, and attention runs up to the highest cell in use: when the
  // server goes idle, the cache rewrites its entries from cell 0 (a memory copy on the CPU; see
  // PrefixCache::compact). Not while requests run: that stalls all of them for the copy, and a
  // make bench run that did it gained nothing over compacting only when idle (docs/design.md).
  void compact_if_due() {
    if (!active_.empty() || !cache_->compaction_due()) return;
    if (const std::int64_t cells = cache_->compact(); cells > 0) {
      spdlog::trace("cache: {} idle cells rewritten from the start of the context", cells);
    }
  }

  // Moves queued requests into free sequences while their prompts fit in the free cells.
  void admit() {
    remote_waits_->plan(queue_, seconds_per_prompt_token_);
    remote_waits_->collect(queue_);
    while (!queue_.empty() && !free_seqs_.empty()) {
      Queued& next = queue_.front();
      if (next.stream->cancelled()) {
        finish_unstarted(next, FinishReason::cancelled, "");
        queue_.pop_front();
        continue;
      }
      // Cells in use: what the cache holds (exact) plus what running requests hold beyond the
      // cells they share with it; the cache frees idle cells when the new prompt needs them.
      const std::int64_t need = static_cast<std::int64_t>(next.request.prompt.size()) + 1;
      const std::int64_t over = cache_->device_cells() + committed_cells() + need - engine_.context_size();
      if (over > 0) cache_->release_device_cells(over);
      if (!active_.empty() && cache_->device_cells() + committed_cells() + need > engine_.context_size()) break;
      Queued admitted = std::move(next);
      queue_.pop_front();
      start(std::move(admitted));
    }
    std::lock_guard lock(mutex_);
    waiting_in_thread_ = static_cast<std::int32_t>(queue_.size() + remote_waits_->size());
    stats_.queued = static_cast<std::int32_t>(inbox_.size()) + waiting_in_thread_;
    stats_.running = static_cast<std::int32_t>(active_.size());
  }

  // Cells running requests hold or will hold for the tokens they have now, besides those the
  // cache accounts (its locked cells).
  std::int64_t committed_cells() const {
    std::int64_t total = 0;
    for (const auto& a : active_) {
      total += static_cast<std::int64_t>(a->tokens.size()) + 1 - (a->uses_cache() ? cache_->locked_by(a->seq) : 0);
    }
    return total;
  }

  void start(Queued queued) {
    // A sampler that cannot be built (a grammar the engine refuses) fails the request, not the
    // scheduler; the API checks grammars first, so this is the last line of defence.
    std::unique_ptr<engine::Sampler> sampler;
    try {
      sampler = engine_.make_sampler(queued.request.sampling);
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
  static void apply(Active& a, const cache::Acquisition& got) {
    a.waiting = got.waiting;
    a.n_past = got.reused;
    a.cache = CacheReport{got.outcome, got.reused, a.n_prompt - got.reused, got.tier, got.in_session,
                          std::move(a.cache.changed_inputs)};
  }

  // A named session's template, kwargs, tools or tool_choice that changed since its previous
  // request: named in the response, counted and traced, since they explain a prompt that diverges
  // before its messages do. They never keep the cache from matching the tokens that stayed equal.
  void observe_prompt_inputs(Active& a) {
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
  void take_resolved_prefixes() {
    for (const cache::Resolved& r : cache_->poll()) {
      for (auto& a : active_) {
        if (a->seq == r.seq && a->waiting) apply(*a, r.acquisition);
      }
    }
  }

  void drop_cancelled() {
    for (size_t i = 0; i < active_.size();) {
      if (active_[i]->stream->cancelled() && !active_[i]->warming) {
        finish(i, FinishReason::cancelled, "");
      } else {
        ++i;
      }
    }
  }

  // Builds one batch: a decode token for every generating request, then prefill chunks in turn.
  void step() {
    if (active_.empty()) return;
    batch_.clear();
    for (auto& a : active_) a->row = -1;
    const auto capacity = static_cast<size_t>(engine_.batch_size());
    for (auto& a : active_) {
      if (!a->decoding() || batch_.size() >= capacity) continue;
      a->row = static_cast<std::int32_t>(batch_.size());
      batch_.push_back(BatchToken{a->tokens[static_cast<size_t>(a->n_past)], a->n_past, a->seq, true});
    }
    // Prefill goes to the prompts with the fewest tokens left first (shortest remaining first
    // minimises the summed time to first token). Where a batch costs time in proportion to its
    // tokens (the CPU), a prompt that completes in this batch is not packed with another one: the
    // short prompt would wait for both.
    std::vector<Active*> order;
    for (auto& a : active_) {
      if (a->prefilling()) order.push_back(a.get());
    }
    // Warm-ups (a few tokens after a delivered reply) come after every waiting prompt.
    std::ranges::stable_sort(order, {}, [](const Active* a) { return std::pair(a->warming, a->n_prompt - a->n_past); });
    std::vector<std::pair<Active*, std::int32_t>> chunks;  // request, tokens added this step
    for (Active* a : order) {
      if (batch_.size() >= capacity) break;
      auto take = static_cast<std::int32_t>(
          std::min<size_t>(capacity - batch_.size(), static_cast<size_t>(a->n_prompt - a->n_past)));
      // A chunk ends where the cache takes a checkpoint of the sequence.
      if (const std::int32_t stop = a->uses_cache() && !a->warming ? cache_->next_stop(a->seq) : -1; stop > a->n_past) {
        take = std::min(take, stop - a->n_past);
      }
      for (std::int32_t j = 0; j < take; ++j) {
        const std::int32_t pos = a->n_past + j;
        // A prefill-only request needs no logits: nothing is sampled from its last token.
        const bool last = pos == a->n_prompt - 1 && !a->warming && !a->request.prefill_only;
        if (last) a->row = static_cast<std::int32_t>(batch_.size());
        batch_.push_back(BatchToken{a->tokens[static_cast<size_t>(pos)], pos, a->seq, last});
      }
      chunks.emplace_back(a, take);
      if (!pack_prefills_ && !a->warming && a->n_past + take == a->n_prompt) break;
    }
    if (batch_.empty()) return;

    const auto decode_start = Clock::now();
    const DecodeStatus status = engine_.decode(batch_);
    observe_prefill_speed(chunks, Clock::now() - decode_start);
    spdlog::trace("step: {} tokens for {} requests decoded in {:.1f} ms", batch_.size(), active_.size(),
                  std::chrono::duration<double, std::milli>(Clock::now() - decode_start).count());
    if (status != DecodeStatus::ok) {
      recover_from_failed_decode(status);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      for (auto& [a, take] : chunks) (a->warming ? stats_.warmup_tokens_total : stats_.prompt_tokens_fed_total) += take;
    }
    for (auto& [a, take] : chunks) {
      a->n_past += take;
      if (a->uses_cache()) cache_->advance(a->seq, a->n_past);
    }
    finish_warmups();
    finish_prefills();
    for (auto& a : active_) {
      if (a->row >= 0 && a->decoding() && a->n_past == static_cast<std::int32_t>(a->tokens.size()) - 1) {
        a->n_past += 1;  // the decode token is now in the KV cache
      }
    }
    for (size_t i = 0; i < active_.size();) {
      Active& a = *active_[i];
      if (a.warming || a.row < 0 || a.n_past != static_cast<std::int32_t>(a.tokens.size())) {
        ++i;
        continue;
      }
      if (!sample_next(a)) {
        if (a.sampler->grammar_stuck()) {
          finish(i, FinishReason::error, "no token of this vocabulary continues the output under the request's grammar");
          continue;
        }
        finish(i, a.text.stopped() ? FinishReason::stop : finish_reason_for(a), "");
      } else {
        ++i;
      }
    }
  }

  // What a prompt token costs to compute, from batches that were mostly prefill (an exponential
  // average): how long a request may wait for the shared tier before waiting costs more than
  // computing what it would bring.
  template <typename Chunks>
  void observe_prefill_speed(const Chunks& chunks, Clock::duration took) {
    std::int64_t prefill = 0;
    for (const auto& [a, take] : chunks) prefill += take;
    if (prefill < 32 || prefill * 2 < static_cast<std::int64_t>(batch_.size())) return;
    const double per_token = std::chrono::duration<double>(took).count() / static_cast<double>(batch_.size());
    seconds_per_prompt_token_ =
        seconds_per_prompt_token_ > 0 ? 0.8 * seconds_per_prompt_token_ + 0.2 * per_token : per_token;
  }

  void observe_ttft(double seconds) {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < SchedulerStats::kTtftBounds.size(); ++i) {
      if (seconds <= SchedulerStats::kTtftBounds[i]) stats_.ttft_buckets[i] += 1;
    }
    stats_.ttft_count += 1;
    stats_.ttft_sum_seconds += seconds;
  }

  FinishReason finish_reason_for(const Active& a) const {
    return a.generated >= a.max_new ? FinishReason::length : FinishReason::stop;
  }

  // Samples one token for `a`; returns false when the request is complete.
  bool sample_next(Active& a) {
    const Token token = a.sampler->sample(a.row);
    const auto now = Clock::now();
    if (a.generated == 0 && a.first_token == Clock::time_point{}) {
      a.first_token = now;
      observe_ttft(std::chrono::duration<double>(now - a.submitted).count());
    }
    if (engine_.vocab().is_end_of_generation(token)) return false;
    a.generated += 1;
    a.tokens.push_back(token);
    if (a.request.logprobs >= 0) {
      a.pending_logprobs.push_back(logprobs_of(engine_.logits(a.row), token, a.request.logprobs, engine_.vocab()));
    }
    std::string text = a.text.append(engine_.vocab().piece(token, false));
    if (!text.empty()) {
      a.emitted_any = true;
      StreamEvent event = StreamEvent::text_event(std::move(text));
      event.logprobs = std::exchange(a.pending_logprobs, {});
      a.stream->push(std::move(event));
    }
    if (a.text.stopped()) return false;
    if (a.generated >= a.max_new) return false;
    if (static_cast<std::int32_t>(a.tokens.size()) >= engine_.context_size()) return false;
    return true;
  }

  // No KV room: the newest request that has sent nothing goes back to the queue; otherwise the
  // newest generating request ends with `length`.
  void recover_from_failed_decode(DecodeStatus status) {
    if (status == DecodeStatus::no_kv_space && cache_->release_device_cells(engine_.batch_size()) > 0) {
      return;  // idle cached prefixes made room; the next step retries the batch
    }
    // Warm-ups are an optimisation for a later request: they give way first.
    bool dropped = false;
    for (size_t i = active_.size(); i-- > 0;) {
      if (active_[i]->warming) {
        end_warmup(i, false);
        dropped = true;
      }
    }
    if (dropped && status == DecodeStatus::no_kv_space) return;
    if (status != DecodeStatus::no_kv_space || active_.size() == 0) {
      spdlog::error("decode failed ({}); failing {} running requests", static_cast<int>(status), active_.size());
      while (!active_.empty()) finish(active_.size() - 1, FinishReason::error, "the model failed to decode the batch");
      return;
    }
    for (size_t i = active_.size(); i-- > 0;) {
      if (!active_[i]->emitted_any && active_[i]->generated == 0 && active_.size() > 1) {
        requeue(i);
        return;
      }
    }
    const size_t victim = active_.size() - 1;
    if (active_[victim]->generated > 0) {
      finish(victim, FinishReason::length, "");
    } else {
      finish(victim, FinishReason::error, "the context is full");
    }
  }

  void requeue(size_t index) {
    std::unique_ptr<Active> a = std::move(active_[index]);
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(index));
    end_sequence(*a, false);
    free_seqs_.push_back(a->seq);
    queue_.push_front(Queued{a->id, std::move(a->request), std::move(a->stream), a->submitted});
    std::lock_guard lock(mutex_);
    stats_.running = static_cast<std::int32_t>(active_.size());
  }

  void finish(size_t index, FinishReason reason, std::string error) {
    std::unique_ptr<Active> a = std::move(active_[index]);
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(index));
    const auto now = Clock::now();
    if (std::string rest = a->text.finish();
        (!rest.empty() || !a->pending_logprobs.empty()) && reason != FinishReason::cancelled) {
      StreamEvent event = StreamEvent::text_event(std::move(rest));
      event.logprobs = std::exchange(a->pending_logprobs, {});
      a->stream->push(std::move(event));
    }
    const bool warm = reason != FinishReason::error && reason != FinishReason::cancelled && warmup_applies(*a);
    if (reason != FinishReason::error && reason != FinishReason::cancelled) remember_reply(*a);
    if (!warm) end_sequence(*a, reason != FinishReason::error);

    StreamEvent done;
    done.kind = StreamEvent::Kind::done;
    done.finish = reason;
    done.error = std::move(error);
    done.usage = Usage{a->n_prompt, a->generated, a->cache.cached_tokens};
    done.cache = a->cache;
    done.timings.queued_ms = ms_between(a->submitted, a->started);
    const auto first = a->generated > 0 || a->first_token != Clock::time_point{} ? a->first_token : now;
    done.timings.prefill_ms = ms_between(a->started, first);
    done.timings.decode_ms = ms_between(first, now);
    spdlog::debug("request {} finished ({}): prompt {} (cached {}, fed {}), generated {}, prefill {:.1f} ms, decode {:.1f} ms",
                  a->id, finish_reason_name(reason), a->n_prompt, a->cache.cached_tokens, a->cache.fed_tokens,
                  a->generated, done.timings.prefill_ms, done.timings.decode_ms);
    {
      std::lock_guard lock(mutex_);
      if (!warm) free_seqs_.push_back(a->seq);
      stats_.prompt_tokens_total += a->n_prompt;
      stats_.generated_tokens_total += a->generated;
      // A warm-up keeps the sequence running; counted before the reply is delivered, so a client
      // that sees the reply and then the stats sees it.
      stats_.running = static_cast<std::int32_t>(active_.size()) + (warm ? 1 : 0);
    }
    a->stream->push(std::move(done));
    if (warm) start_warmup(std::move(a));
  }

  void remember_reply(const Active& a) {
    if (!a.uses_cache() || a.generated == 0) return;
    sessions_.remember_reply(a.session(), a.tokens, static_cast<std::size_t>(a.n_prompt));
  }

  // A reply that ended normally, of a request whose template says what follows the reply, in a
  // session whose client sends replies back: the generated tokens are the reply as the next turn
  // renders it unless a stop string cut the text.
  bool warmup_applies(const Active& a) const {
    if (!options_.cache_warmup || !a.uses_cache() || a.waiting || a.request.cache.continuation.empty() ||
        a.text.stopped() ||
        static_cast<std::int64_t>(a.tokens.size() + a.request.cache.continuation.size()) >= engine_.context_size()) {
      return false;
    }
    return sessions_.echoes(a.session());
  }

  void start_warmup(std::unique_ptr<Active> a) {
    const auto& tail = a->request.cache.continuation;
    a->tokens.insert(a->tokens.end(), tail.begin(), tail.end());
    a->n_prompt = static_cast<std::int32_t>(a->tokens.size());
    a->warming = true;
    a->row = -1;
    active_.push_back(std::move(a));
  }

  // Prefill-only requests whose whole prompt is in their sequence end now; finish() donates it.
  void finish_prefills() {
    for (size_t i = 0; i < active_.size();) {
      const Active& a = *active_[i];
      if (a.request.prefill_only && !a.waiting && a.n_past == a.n_prompt) {
        finish(i, FinishReason::length, "");
      } else {
        ++i;
      }
    }
  }

  // Warm-ups whose end of turn is now in their sequence go to the cache.
  void finish_warmups() {
    for (size_t i = active_.size(); i-- > 0;) {
      if (active_[i]->warming && active_[i]->n_past >= active_[i]->n_prompt) end_warmup(i, true);
    }
  }

  void end_warmup(size_t index, bool keep) {
    std::unique_ptr<Active> a = std::move(active_[index]);
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(index));
    end_sequence(*a, keep);
    std::lock_guard lock(mutex_);
    free_seqs_.push_back(a->seq);
    if (keep) stats_.warmups_total += 1;
    stats_.running = static_cast<std::int32_t>(active_.size());
  }

  // Gives the request's sequence back: its K/V to the cache when `keep`, else dropped.
  void end_sequence(Active& a, bool keep) {
    if (!a.uses_cache()) {
      engine_.remove_sequence(a.seq, 0, -1);
    } else if (keep && !a.waiting) {
      const auto kept = static_cast<size_t>(std::min<std::int32_t>(a.n_past, static_cast<std::int32_t>(a.tokens.size())));
      const auto donate_start = Clock::now();
      cache_->donate(a.seq, std::span<const Token>(a.tokens).first(kept));
      spdlog::trace("request {}: cache donate took {:.1f} ms", a.id,
                    std::chrono::duration<double, std::milli>(Clock::now() - donate_start).count());
    } else {
      cache_->release(a.seq);
    }
  }

  void finish_unstarted(Queued& q, FinishReason reason, std::string error) {
    StreamEvent done;
    done.kind = StreamEvent::Kind::done;
    done.finish = reason;
    done.error = std::move(error);
    done.usage.prompt_tokens = static_cast<std::int32_t>(q.request.prompt.size());
    done.cache.outcome = cache::Outcome::bypass;
    q.stream->push(std::move(done));
  }

  void shutdown() {
    for (size_t i = active_.size(); i-- > 0;) {
      if (active_[i]->warming) end_warmup(i, false);
    }
    while (!active_.empty()) finish(active_.size() - 1, FinishReason::cancelled, "the server is shutting down");
    for (Queued& q : queue_) finish_unstarted(q, FinishReason::cancelled, "the server is shutting down");
    queue_.clear();
    for (Queued& q : remote_waits_->take_all()) finish_unstarted(q, FinishReason::cancelled, "the server is shutting down");
    std::lock_guard lock(mutex_);
    for (Queued& q : inbox_) finish_unstarted(q, FinishReason::cancelled, "the server is shutting down");
    inbox_.clear();
  }

  engine::Engine& engine_;
  SchedulerOptions options_;

  // Owned by the scheduler thread.
  std::unique_ptr<cache::PrefixCache> cache_;
  std::vector<std::unique_ptr<Active>> active_;
  std::vector<BatchToken> batch_;
  bool pack_prefills_ = false;  // several prompts may complete in one batch (see step())
  double seconds_per_prompt_token_ = 0;  // measured (observe_prefill_speed); 0 until a prefill ran
  SessionMemory sessions_;
  std::deque<Queued> queue_;      // admitted in order once a sequence is free and the prompt fits
  std::unique_ptr<RemoteWaits> remote_waits_;  // requests waiting for their shared-tier lookup
  std::vector<engine::SeqId> free_seqs_;

  // Shared with submitters; guarded by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> inbox_;        // submitted, not yet taken by the scheduler thread
  // Requests the scheduler thread holds that wait for a sequence (its queue and remote waits):
  // recounted after each admission, raised when the inbox is taken.
  std::int32_t waiting_in_thread_ = 0;
  bool fetch_ready_ = false;      // a lookup finished since the loop last looked
  std::deque<std::function<void()>> commands_;
  SchedulerStats stats_;
  std::uint64_t next_id_ = 0;
  bool stopping_ = false;

  std::thread thread_;  // last: starts after every member above is constructed
};

Scheduler::Scheduler(engine::Engine& engine, SchedulerOptions options)
    : impl_(std::make_unique<Impl>(engine, options)) {}
Scheduler::~Scheduler() = default;

std::expected<std::shared_ptr<RequestStream>, SubmitError> Scheduler::submit(GenerationRequest request) {
  return impl_->submit(std::move(request));
}
SchedulerStats Scheduler::stats() const { return impl_->stats(); }
std::int32_t Scheduler::max_prompt_tokens() const { return impl_->max_prompt_tokens(); }
cache::CacheStats Scheduler::cache_stats() const { return impl_->cache_stats(); }
const cache::CacheConfig& Scheduler::cache_config() const { return impl_->cache_config(); }
cache::ResetReport Scheduler::reset_cache(const std::optional<cache::ScopeId>& scope) {
  return impl_->reset_cache(scope);
}
bool Scheduler::with_cache(const std::function<void(cache::PrefixCache&)>& operation) {
  return impl_->with_cache(operation);
}

}  // namespace prefixd::scheduler
