// prefixd scheduler — one step: a batch of decode tokens and prefill chunks, sampling and stop
// strings, recovery from a failed decode, and finishing a request (its reply, its sequence).
#include "scheduler/scheduler_impl.h"

#include <algorithm>
#include <spdlog/spdlog.h>

#include "scheduler/logprobs.h"

namespace prefixd::scheduler {
// Prefill order: waiting prompts before warm-ups; among them, those held back too long first
// (the longest held back first), then shortest remaining first.
bool prefills_before(const Active* x, const Active* y) {
  if (x->warming != y->warming) return !x->warming;
  const bool x_late = x->held_back_too_long();
  const bool y_late = y->held_back_too_long();
  if (x_late != y_late) return x_late;
  if (x_late) return x->passed_over_tokens > y->passed_over_tokens;
  return x->n_prompt - x->n_past < y->n_prompt - y->n_past;
}

using engine::BatchToken;
using engine::DecodeStatus;
using engine::Token;

// One step: prefill calls (prompt tokens before each prompt's last one, and warm-ups), then
// row-wise calls (the rows sampled from: a decode token of every generating request and the last
// token of every prompt that is now complete).
void Scheduler::Impl::step() {
  if (active_.empty()) return;
  ++step_serial_;
  choose_adapters();
  // Benched requests sit out this step only.
  const struct Unbench {
    std::vector<std::unique_ptr<Active>>& active;
    ~Unbench() {
      for (auto& a : active) a->benched = false;
    }
  } unbench{active_};
  // Idle cached cells give way before the step needs theirs (running requests grow by their
  // generated tokens, and a lone row takes one more for its padding): a call that finds no free
  // cell fails in libllama and is only retried after the cache has made room.
  {
    const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
    life().make_room_for_step(running_cells());
  }
  plan_drafts();  // in the cells left free after that
  // An image is decoded on its own (its rows are embeddings, not tokens), before the batch.
  if (!prefill_next_image()) return;
  for (auto& a : active_) a->row = -1;
  if (!prefill_calls()) return;
  finish_warmups();
  finish_prefills();
  sampled_calls();
}

// A call computes under one set of LoRA adapters, so a step serves the requests of one set, and
// every other set's requests sit the step out (benched). A set keeps the steps for a turn of
// kAdapterTurn while its requests (not counting warm-ups) have work; then the turn goes to the set
// of the request with work that has gone longest without a step (the oldest Active::last_step,
// the first in active_ among equals; a warm-up's only when no other request has work).
// Without adapters every request is under the empty set and nothing changes.
void Scheduler::Impl::choose_adapters() {
  if (engine_.model().adapters.empty()) return;
  const Active* longest = nullptr;
  bool turn_has_work = false;
  for (const auto& a : active_) {
    if (!a->prefilling() && !a->decoding()) continue;
    if (!a->warming && a->request.adapters == turn_adapters_) turn_has_work = true;
    const bool before = longest == nullptr || (longest->warming && !a->warming) ||
                        (longest->warming == a->warming && a->last_step < longest->last_step);
    if (before) longest = a.get();
  }
  if (longest == nullptr) return;
  const Clock::time_point now = Clock::now();
  if (!turn_has_work || now - turn_started_ >= kAdapterTurn) {
    if (longest->request.adapters != turn_adapters_) {
      turn_adapters_ = longest->request.adapters;
      std::lock_guard lock(mutex_);
      stats_.adapter_switches_total += 1;
    }
    turn_started_ = now;
  }
  for (auto& a : active_) {
    a->benched = a->request.adapters != turn_adapters_;
    if (!a->benched) a->last_step = step_serial_;
  }
  const StepClock::Scope in_model = step_clock_.enter(StepPhase::compute);
  engine_.use_adapters(turn_adapters_);
}

// The prompt tokens a request still prefills in prefill calls: those before its last one, which
// is sampled from and so computed in a row-wise call (sampled_calls); none when the rest of the
// prompt joins that call (tail_joins_rowwise_call).
std::int32_t Scheduler::Impl::prefill_end(const Active& a) const {
  if (a.warming || a.request.prefill_only || a.whole_prompt()) return a.n_prompt;
  return tail_joins_rowwise_call(a) ? a.n_past : a.n_prompt - 1;
}

// Whether the rest of `a`'s prompt (2 to rowwise_rows() tokens and at most a batch, its last one
// included) is computed in the step's row-wise call rather than in a prefill call followed by that
// call: a hit that adds a short suffix, or a short prompt, then costs one model call instead of two
// (on the CPU the second was about a decode step). Every row of a call of 2 to rowwise_rows() rows takes the same
// kernels whatever else the call holds (docs/design.md, "Exactness"), and the suffix's tokens
// before the last one were computed in such a call before too, so every position is computed as
// it was. Not with images in it, nor across a checkpoint the cache takes inside it, nor where
// chunks are aligned (--deterministic) or a GPU computes a row differently by its call's size.
bool Scheduler::Impl::tail_joins_rowwise_call(const Active& a) const {
  // Not for an embedding: every row of a call that reads embeddings is an output (logits too).
  if (!a.prefilling() || a.warming || a.request.prefill_only || a.request.embed != EmbedMode::none) return false;
  if (engine_.deterministic() || engine_.model().on_accelerator || engine_.rowwise_rows() <= 0) return false;
  const std::int32_t rest = a.n_prompt - a.n_past;
  if (rest < 2 || rest > std::min(engine_.rowwise_rows(), engine_.batch_size())) return false;
  if (a.next_image(a.n_past) < a.n_prompt || a.image_at(a.n_past) != nullptr) return false;
  const std::int32_t stop = a.uses_cache() ? life().next_stop(a.seq) : -1;
  return stop <= a.n_past || stop >= a.n_prompt;
}

// Whether `a` has rows in the step's row-wise calls now: its next decode token, or the last token
// of a prompt whose earlier tokens are all computed (or that joins the call with them).
bool Scheduler::Impl::has_sampled_row(const Active& a) const {
  if (a.decoding()) return true;
  return a.prefilling() && !a.warming && a.n_past == prefill_end(a) && prefill_end(a) < a.n_prompt &&
         a.image_at(a.n_past) == nullptr;
}

// The rows `a` puts in a row-wise call, its draft aside: one decode token, or the prompt's tokens
// from n_past to its last one.
std::int32_t Scheduler::Impl::sampled_rows(const Active& a) const {
  return a.n_past < a.n_prompt ? a.n_prompt - a.n_past : 1;
}

// Prefill goes to the prompts with the fewest tokens left first (shortest remaining first
// minimises the summed time to first token), except those it has held back too long
// (prefills_before). Once a prompt completes in this step, packing_ decides who may join it
// (PrefillPacking): where a batch costs time in proportion to its tokens (the CPU), a completing
// prompt must not wait for a long chunk beside it. Deterministic engines take each chunk in a call
// of its own, from one multiple of rowwise_rows() to the next, so that a position is computed the
// same way however the prompt was split into requests. Returns false when a call failed.
bool Scheduler::Impl::prefill_calls() {
  std::vector<Active*> order;
  for (auto& a : active_) {
    if (a->prefilling() && a->n_past < prefill_end(*a)) order.push_back(a.get());
  }
  if (order.empty()) return true;
  // Warm-ups (a few tokens after a delivered reply) come after every waiting prompt.
  std::ranges::stable_sort(order, prefills_before);
  const bool aligned = engine_.deterministic() && engine_.rowwise_rows() > 0;
  const auto capacity = static_cast<size_t>(engine_.batch_size());
  const auto decode_tokens =
      static_cast<std::int64_t>(std::ranges::count_if(active_, [this](const auto& a) { return has_sampled_row(*a); }));
  const auto waiting = static_cast<std::int64_t>(std::ranges::count_if(order, [](const Active* a) { return !a->warming; }));
  std::vector<Chunk> chunks;
  size_t rows = 0;
  std::int64_t served = 0;      // waiting prompts given a chunk of this step
  std::int64_t completing = 0;  // of which complete their prefill in it
  for (Active* a : order) {
    if (rows >= capacity) break;
    if (a->image_at(a->n_past) != nullptr) continue;  // its image goes first, in a step of its own
    const std::int32_t end = prefill_end(*a);
    auto take = static_cast<std::int32_t>(std::min<size_t>(capacity - rows, static_cast<size_t>(end - a->n_past)));
    take = std::min(take, a->next_image(a->n_past) - a->n_past);
    // A chunk ends where the cache takes a checkpoint of the sequence.
    if (const std::int32_t stop = a->uses_cache() && !a->warming ? life().next_stop(a->seq) : -1; stop > a->n_past) {
      take = std::min(take, stop - a->n_past);
    }
    if (aligned && !a->whole_prompt()) {
      const std::int32_t k = engine_.rowwise_rows();
      take = std::min(take, (a->n_past / k + 1) * k - a->n_past);
    }
    if (take <= 0) continue;
    // A whole-prompt embedding goes in only all at once, then beside the others of its request.
    if (a->whole_prompt() && take < end - a->n_past) continue;
    const bool completes = !a->warming && a->n_past + take == end;
    // Bounded packing: a prompt joining the completing ones spares itself and every prompt still
    // waiting behind it one step, which costs at least the step's decode tokens, and makes each
    // completing prompt wait for its tokens. It joins when the first outweighs the second.
    if (completing > 0 && packing_ == PrefillPacking::bounded && a->request.embed == EmbedMode::none &&
        (!completes || completing * take > (waiting - served) * decode_tokens)) {
      break;
    }
    chunks.emplace_back(a, take);
    rows += static_cast<size_t>(take);
    if (completes && packing_ == PrefillPacking::off && a->request.embed == EmbedMode::none) break;
    served += a->warming ? 0 : 1;
    completing += completes ? 1 : 0;
  }
  // Prompt tokens this step computes for the waiting prompts, the last token of each one completing
  // here (computed in the step's row-wise call) included.
  std::int64_t prefilled = 0;
  for (const auto& [a, take] : chunks) {
    if (!a->warming) prefilled += take + (a->n_past + take == prefill_end(*a) && prefill_end(*a) < a->n_prompt ? 1 : 0);
  }
  for (Active* a : order) {
    const bool got = std::ranges::any_of(chunks, [a](const Chunk& c) { return c.first == a; });
    if (!got && !a->warming) a->passed_over_tokens += prefilled;
  }
  // One call for every chunk, or one call each when aligned.
  for (size_t first = 0; first < chunks.size();) {
    const size_t last = aligned ? first + 1 : chunks.size();
    batch_.clear();
    std::vector<std::int32_t> first_row;  // of each chunk of the call
    for (size_t c = first; c < last; ++c) {
      const auto& [a, take] = chunks[c];
      first_row.push_back(static_cast<std::int32_t>(batch_.size()));
      for (std::int32_t j = 0; j < take; ++j) {
        const std::int32_t pos = a->n_past + j;
        batch_.push_back(BatchToken{a->tokens[static_cast<size_t>(pos)], pos, a->seq, a->whole_prompt()});
      }
    }
    const std::span<const Chunk> call(chunks.begin() + static_cast<std::ptrdiff_t>(first),
                                      chunks.begin() + static_cast<std::ptrdiff_t>(last));
    const auto decode_start = Clock::now();
    const DecodeStatus status = [&] {
      const StepClock::Scope in_model = step_clock_.enter(StepPhase::compute);
      return engine_.decode(batch_);
    }();
    observe_prefill_speed(call, Clock::now() - decode_start);
    spdlog::trace("step: {} prompt tokens for {} requests decoded in {:.1f} ms", batch_.size(), call.size(),
                  std::chrono::duration<double, std::milli>(Clock::now() - decode_start).count());
    if (status != DecodeStatus::ok) {
      recover_from_failed_decode(status);
      return false;
    }
    {
      std::lock_guard lock(mutex_);
      for (const auto& [a, take] : call) (a->warming ? stats_.warmup_tokens_total : stats_.prompt_tokens_fed_total) += take;
    }
    {
      const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
      for (const auto& [a, take] : call) {
        a->n_past += take;
        if (a->uses_cache()) life().advance(a->seq, a->n_past);
      }
    }
    for (size_t c = 0; c < call.size(); ++c) {
      if (call[c].first->whole_prompt()) take_embedding(*call[c].first, first_row[c], call[c].second);
    }
    for (const auto& [a, take] : call) report_progress(*a);
    first = last;
  }
  return true;
}

// The rows sampled from, in calls of at most rowwise_rows() rows: each such row is computed by
// the same kernels whatever else its call holds, so a request's tokens do not depend on which
// requests run beside it, and the last token of a prompt is computed alike whether the rest of
// the prompt came from the cache or was just computed.
void Scheduler::Impl::sampled_calls() {
  std::vector<Active*> rows;
  for (auto& a : active_) {
    if (has_sampled_row(*a)) rows.push_back(a.get());
  }
  const auto limit = static_cast<size_t>(engine_.rowwise_rows() > 0 ? std::min(engine_.rowwise_rows(), engine_.batch_size())
                                                                     : engine_.batch_size());
  // A request's draft rides in the rows after its decode token, in the same call (plan_drafts keeps
  // a draft below the limit).
  const auto rows_of = [this](const Active* a) { return static_cast<size_t>(sampled_rows(*a)) + a->draft.size(); };
  for (size_t first = 0; first < rows.size();) {
    size_t last = first;
    for (size_t taken = 0; last < rows.size() && (last == first || taken + rows_of(rows[last]) <= limit); ++last) {
      taken += rows_of(rows[last]);
    }
    batch_.clear();
    for (auto& a : active_) a->row = -1;
    bool prompt_rows_in_call = false;
    for (size_t r = first; r < last; ++r) {
      Active* a = rows[r];
      // A prompt's tail: every token but the last is computed without output, as in a prefill call.
      for (std::int32_t pos = a->n_past; pos + 1 < a->n_past + sampled_rows(*a); ++pos) {
        batch_.push_back(BatchToken{a->tokens[static_cast<size_t>(pos)], pos, a->seq, false});
      }
      const std::int32_t pos = a->n_past + sampled_rows(*a) - 1;
      a->row = static_cast<std::int32_t>(batch_.size());
      if (rollback_by_checkpoint_ && !a->draft.empty()) a->state_before_draft = engine_.save_checkpoint(a->seq);
      batch_.push_back(BatchToken{a->tokens[static_cast<size_t>(pos)], pos, a->seq, true});
      for (size_t j = 0; j < a->draft.size(); ++j) {
        batch_.push_back(BatchToken{a->draft[j], pos + 1 + static_cast<std::int32_t>(j), a->seq, true});
      }
      prompt_rows_in_call = prompt_rows_in_call || a->n_past < a->n_prompt;
    }
    // A prompt's last token alone is padded into a row-wise call; a lone decode token is not
    // (unless the engine is deterministic): padding it costs a fifth of the decode speed of a
    // request running alone (docs/benchmarks.md, "Exactness").
    const auto decode_start = Clock::now();
    const DecodeStatus status = [&] {
      const StepClock::Scope in_model = step_clock_.enter(StepPhase::compute);
      return prompt_rows_in_call ? engine_.decode_padded(batch_) : engine_.decode(batch_);
    }();
    const double took = std::chrono::duration<double>(Clock::now() - decode_start).count();
    spdlog::trace("step: {} sampled rows decoded in {:.1f} ms", batch_.size(), took * 1000);
    if (speculation_ && status == DecodeStatus::ok) row_costs_.observe(static_cast<std::int32_t>(batch_.size()), took);
    if (status != DecodeStatus::ok) {
      recover_from_failed_decode(status);
      return;
    }
    std::int64_t prompt_rows = 0;
    std::vector<Active*> tails;  // prompts whose tokens before the last one were in this call
    {
      const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
      for (size_t r = first; r < last; ++r) {
        Active* a = rows[r];
        const std::int32_t computed = sampled_rows(*a);
        const bool prompt = a->n_past < a->n_prompt;
        prompt_rows += prompt ? computed : 0;
        if (prompt && computed > 1) tails.push_back(a);
        a->n_past += computed;  // its tokens are now in the KV cache
        if (a->uses_cache()) life().advance(a->seq, a->n_past);  // a generated token's cell too
      }
    }
    // A tail's tokens before the last one are reported as a prefill call's would have been.
    for (Active* a : tails) report_progress(*a, a->n_prompt - 1);
    if (prompt_rows > 0) {
      std::lock_guard lock(mutex_);
      stats_.prompt_tokens_fed_total += prompt_rows;
    }
    // Sampling ends only requests of this call (those with a row), so rows[last...] stay valid.
    sample_all();
    first = last;
  }
}

// Whether a step has work: a request that is not only waiting for its masked draw.
bool Scheduler::Impl::runnable() const {
  return std::ranges::any_of(active_, [](const auto& a) { return !a->drawing; });
}

// Draws the next token of every request whose last token was just decoded. A draw the grammar
// refuses goes to MaskedDraws, and the request sits out of the batches until it is back.
void Scheduler::Impl::sample_all() {
  // What take_token and finish do inside is output (and cache), in scopes of their own.
  const StepClock::Scope in_sampling = step_clock_.enter(StepPhase::sampling);
  for (size_t i = 0; i < active_.size();) {
    Active& a = *active_[i];
    if (a.warming || a.row < 0 || a.n_past != static_cast<std::int32_t>(a.tokens.size())) {
      ++i;
      continue;
    }
    if (!a.draft.empty()) {
      verify_draft(i);
      continue;
    }
    if (a.request.embed == EmbedMode::last_row) {
      take_embedding(a, a.row, 1);
      finish_embedding(i);
      continue;
    }
    const std::optional<Token> token = a.sampler->sample_quick(a.row);
    if (!token) {
      defer_draw(a, a.row);
      ++i;
      continue;
    }
    settle(i, take_token(a, *token, engine_.logits(a.row)));
  }
  if (rollback_by_checkpoint_) {
    const StepClock::Scope rolling_back = step_clock_.enter(StepPhase::scheduling);
    roll_back_states();
  }
}

// The grammar refused the quick draw from `row`: the token is drawn from a copy of its logits off
// this thread (MaskedDraws), and the request sits out of the batches until it is back.
void Scheduler::Impl::defer_draw(Active& a, std::int32_t row) {
  const StepClock::Scope in_sampling = step_clock_.enter(StepPhase::sampling);
  const std::span<const float> logits = engine_.logits(row);
  draws_->submit(a.id, a.sampler, std::vector<float>(logits.begin(), logits.end()));
  a.drawing = true;
}

// Masked draws that came back: each request takes its token as if it had been drawn in place.
// A draw whose request has ended (or been queued again, with a new sampler) is dropped.
void Scheduler::Impl::take_masked_draws() {
  for (MaskedDraws::Drawn& drawn : draws_->take()) {
    const auto it = std::ranges::find_if(active_, [&](const auto& a) {
      return a->id == drawn.request_id && a->drawing && a->sampler.get() == drawn.sampler;
    });
    if (it == active_.end()) continue;
    size_t i = static_cast<size_t>(it - active_.begin());
    Active& a = **it;
    a.drawing = false;
    if (!drawn.failure.empty()) {
      finish(i, FinishReason::error, "sampling failed: " + drawn.failure);
      continue;
    }
    settle(i, take_token(a, drawn.token, drawn.logits));
  }
}

// After a token: the request at `index` goes on (`more`; the index moves past it) or ends there.
void Scheduler::Impl::settle(size_t& index, bool more) {
  if (more) {
    ++index;
    return;
  }
  const Active& a = *active_[index];
  if (a.sampler->grammar_stuck()) {
    finish(index, FinishReason::error, "no token of this vocabulary continues the output under the request's grammar");
    return;
  }
  const bool stop_string = a.text.stopped() && !a.text.ended_by_indent();
  finish(index, stop_string ? FinishReason::stop : finish_reason_for(a), "");
}

// What a prompt token costs to compute, from batches that were mostly prefill (an exponential
// average): how long a request may wait for the shared tier before waiting costs more than
// computing what it would bring.
void Scheduler::Impl::observe_prefill_speed(std::span<const Chunk> chunks, Clock::duration took) {
  std::int64_t prefill = 0;
  for (const auto& [a, take] : chunks) prefill += take;
  if (prefill < 32 || prefill * 2 < static_cast<std::int64_t>(batch_.size())) return;
  const double per_token = std::chrono::duration<double>(took).count() / static_cast<double>(batch_.size());
  seconds_per_prompt_token_ =
      seconds_per_prompt_token_ > 0 ? 0.8 * seconds_per_prompt_token_ + 0.2 * per_token : per_token;
}

void Scheduler::Impl::observe_ttft(double seconds, cache::Outcome outcome) {
  std::lock_guard lock(mutex_);
  SchedulerStats::TtftHistogram& by_outcome = stats_.ttft_by_outcome[static_cast<size_t>(outcome)];
  for (size_t i = 0; i < SchedulerStats::kTtftBounds.size(); ++i) {
    if (seconds <= SchedulerStats::kTtftBounds[i]) {
      stats_.ttft_buckets[i] += 1;
      by_outcome.buckets[i] += 1;
    }
  }
  stats_.ttft_count += 1;
  stats_.ttft_sum_seconds += seconds;
  by_outcome.count += 1;
  by_outcome.sum_seconds += seconds;
}

FinishReason Scheduler::Impl::finish_reason_for(const Active& a) const {
  return a.generated >= a.max_new || a.out_of_time || a.text.ended_by_indent() ? FinishReason::length
                                                                               : FinishReason::stop;
}

// Takes `token`, drawn from `logits`, as `a`'s next token; returns false when the request is
// complete.
bool Scheduler::Impl::take_token(Active& a, Token token, std::span<const float> logits) {
  const StepClock::Scope in_output = step_clock_.enter(StepPhase::output);
  turn_sampled_ = true;
  const auto now = Clock::now();
  if (a.generated == 0 && a.first_token == Clock::time_point{}) {
    a.first_token = now;
    observe_ttft(std::chrono::duration<double>(now - a.submitted).count(), a.cache.outcome);
  }
  if (engine_.vocab().is_end_of_generation(token)) return false;
  a.generated += 1;
  a.tokens.push_back(token);
  if (a.request.logprobs >= 0) {
    const StepClock::Scope in_sampling = step_clock_.enter(StepPhase::sampling);
    a.pending_logprobs.push_back(logprobs_of(logits, token, a.request.logprobs, engine_.vocab()));
  }
  std::string piece = engine_.vocab().piece(token, false);
  if (piece.find('\n') != std::string::npos) a.wrote_newline = true;
  std::string text = a.text.append(std::move(piece));
  if (!text.empty()) {
    a.emitted_any = true;
    StreamEvent event = StreamEvent::text_event(std::move(text));
    event.logprobs = std::exchange(a.pending_logprobs, {});
    a.stream->push(std::move(event));
  }
  if (a.text.stopped()) return false;
  if (a.generated >= a.max_new) return false;
  if (const auto limit = a.request.time_limit_after_newline; limit.count() > 0 && a.wrote_newline && now - a.first_token > limit) {
    a.out_of_time = true;
    return false;
  }
  if (static_cast<std::int32_t>(a.tokens.size()) >= engine_.context_size()) return false;
  return true;
}

// No KV room: the newest request that has sent nothing goes back to the queue; otherwise the
// newest generating request ends with `length`.
void Scheduler::Impl::recover_from_failed_decode(DecodeStatus status) {
  if (status == DecodeStatus::no_kv_space) {
    const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
    if (life().release_device_cells(engine_.batch_size()) > 0) return;  // the next step retries the batch
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

void Scheduler::Impl::requeue(size_t index) {
  std::unique_ptr<Active> a = std::move(active_[index]);
  active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(index));
  end_sequence(*a, false);
  free_seqs_.push_back(a->seq);
  a->step_share.leave(step_clock_);
  Queued q{a->id, std::move(a->request), std::move(a->stream), a->submitted};
  q.step_share = a->step_share;
  queue_.push_front(std::move(q));
  std::lock_guard lock(mutex_);
  stats_.running = static_cast<std::int32_t>(active_.size());
}

namespace {

// A finished request's share of the steps (debug): whether its time went to the model or around it.
void log_steps(const Active& a) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  const StepTally& tally = a.step_share.tally();
  const auto ms = [](StepTimes::Duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  spdlog::debug("request {} steps: {} (compute {:.1f} ms, sampling {:.1f} ms, output {:.1f} ms, cache {:.1f} ms, "
                "scheduling {:.1f} ms; waits between steps {:.1f} ms)",
                a.id, tally.steps, ms(tally.times[StepPhase::compute]), ms(tally.times[StepPhase::sampling]),
                ms(tally.times[StepPhase::output]), ms(tally.times[StepPhase::cache]),
                ms(tally.times[StepPhase::scheduling]), ms(tally.waits));
}

}  // namespace

void Scheduler::Impl::finish(size_t index, FinishReason reason, std::string error) {
  const StepClock::Scope in_output = step_clock_.enter(StepPhase::output);
  std::unique_ptr<Active> a = std::move(active_[index]);
  active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(index));
  const auto now = Clock::now();
  if (std::string rest = a->text.finish();
      (!rest.empty() || !a->pending_logprobs.empty()) && reason != FinishReason::cancelled) {
    StreamEvent event = StreamEvent::text_event(std::move(rest));
    event.logprobs = std::exchange(a->pending_logprobs, {});
    a->stream->push(std::move(event));
  }
  bool warm = false;
  {
    const StepClock::Scope bookkeeping = step_clock_.enter(StepPhase::scheduling);
    warm = reason != FinishReason::error && reason != FinishReason::cancelled && warmup_applies(*a);
    if (reason != FinishReason::error && reason != FinishReason::cancelled) remember_reply(*a);
    remember_output(*a);
    if (drafter_ && a->drafting) {
      const ModelDrafter::LaneReport lane = drafter_->report(a->seq);
      if (lane.cached_tokens + lane.fed_tokens > 0) a->cache.draft = DraftCacheReport{lane.cached_tokens, lane.fed_tokens};
    }
  }
  if (!warm) end_sequence(*a, reason != FinishReason::error);
  a->step_share.leave(step_clock_);

  StreamEvent done;
  done.kind = StreamEvent::Kind::done;
  done.finish = reason;
  done.error = std::move(error);
  done.stop_sequence = a->text.matched_stop();
  done.embedding = std::move(a->embedding);
  done.usage = Usage{a->n_prompt, a->generated, a->cache.cached_tokens};
  done.cache = a->cache;
  done.timings.queued_ms = ms_between(a->submitted, a->started);
  const auto first = a->generated > 0 || a->first_token != Clock::time_point{} ? a->first_token : now;
  done.timings.prefill_ms = ms_between(a->started, first);
  done.timings.decode_ms = ms_between(first, now);
  done.timings.speculative = a->drafting.has_value();
  done.timings.draft_n = a->drafts.drafted();
  done.timings.draft_accepted = a->drafts.accepted();
  {
    // Writing the log is not output (text and events for the client): at debug level it is the rest.
    const StepClock::Scope logging = step_clock_.enter(StepPhase::scheduling);
    spdlog::debug("request {} finished ({}): prompt {} (cached {}, fed {}), generated {}, prefill {:.1f} ms, decode {:.1f} ms",
                  a->id, finish_reason_name(reason), a->n_prompt, a->cache.cached_tokens, a->cache.fed_tokens,
                  a->generated, done.timings.prefill_ms, done.timings.decode_ms);
    log_steps(*a);
  }
  {
    std::lock_guard lock(mutex_);
    if (!warm) free_seqs_.push_back(a->seq);
    stats_.prompt_tokens_total += a->n_prompt;
    stats_.generated_tokens_total += a->generated;
    stats_.images_total += a->cache.images;
    stats_.images_cached_total += a->cache.images_cached;
    // A warm-up keeps the sequence running; counted before the reply is delivered, so a client
    // that sees the reply and then the stats sees it.
    stats_.running = static_cast<std::int32_t>(active_.size()) + (warm ? 1 : 0);
    stats_.kv_cells_running = warm ? a->n_past : 0;
    for (const auto& other : active_) stats_.kv_cells_running += other->n_past;
  }
  a->stream->push(std::move(done));
  if (warm) start_warmup(std::move(a));
}

// Prefill-only requests whose whole prompt is in their sequence end now; finish() donates it.
void Scheduler::Impl::finish_prefills() {
  for (size_t i = 0; i < active_.size();) {
    const Active& a = *active_[i];
    if (a.whole_prompt() && a.n_past == a.n_prompt) {
      finish_embedding(i);
    } else if (a.request.prefill_only && !a.waiting && a.n_past == a.n_prompt) {
      finish(i, FinishReason::length, "");
    } else {
      ++i;
    }
  }
}

// An embedding request's vectors from the call that just computed `rows` of its tokens from batch
// row `first_row` on: one pooled vector, or (per_token) one per row.
void Scheduler::Impl::take_embedding(Active& a, std::int32_t first_row, std::int32_t rows) {
  const StepClock::Scope in_output = step_clock_.enter(StepPhase::output);
  if (!a.request.per_token) {
    const std::span<const float> pooled = engine_.embedding(a.seq, first_row + rows - 1);
    a.embedding.assign(pooled.begin(), pooled.end());
    return;
  }
  for (std::int32_t r = first_row; r < first_row + rows; ++r) {
    const std::span<const float> row = engine_.embedding(a.seq, r);
    if (row.empty()) {
      a.embedding.clear();
      return;
    }
    a.embedding.insert(a.embedding.end(), row.begin(), row.end());
  }
}

// An embedding request whose vectors were taken ends; the engine gave none is a failure.
void Scheduler::Impl::finish_embedding(size_t index) {
  Active& a = *active_[index];
  if (a.first_token == Clock::time_point{}) a.first_token = Clock::now();
  if (a.embedding.empty()) {
    finish(index, FinishReason::error, "the model computed no embedding for the input");
    return;
  }
  finish(index, FinishReason::stop, "");
}

// Gives the request's sequence back: its K/V to the cache when `keep`, else dropped.
void Scheduler::Impl::end_sequence(Active& a, bool keep) {
  const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
  if (drafter_) drafter_->end(a.seq, a.tokens, keep);
  if (!a.uses_cache()) {
    engine_.remove_sequence(a.seq, 0, -1);
  } else if (keep && !a.waiting) {
    const auto kept = static_cast<size_t>(std::min<std::int32_t>(a.n_past, static_cast<std::int32_t>(a.tokens.size())));
    const auto donate_start = Clock::now();
    const std::span<const Token> donated = std::span<const Token>(a.tokens).first(kept);
    life().donate(a.seq, donated);
    if (!a.request.cache.session_key.empty()) sessions_.remember_kept(cache_key(a.request.cache), donated);
    if (a.seq >= 0 && a.seq < options_.n_slots) {
      slot_kept_[static_cast<std::size_t>(a.seq)] = SessionPrompt{cache_key(a.request.cache), {donated.begin(), donated.end()}};
    }
    spdlog::trace("request {}: cache donate took {:.1f} ms", a.id,
                  std::chrono::duration<double, std::milli>(Clock::now() - donate_start).count());
  } else {
    life().release(a.seq);
  }
}

}  // namespace prefixd::scheduler
