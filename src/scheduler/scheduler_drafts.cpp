// prefixd scheduler — speculative decoding. Before a step, each generating request with drafting on
// guesses the tokens after its decode token (n-gram guesses from src/speculative, or a draft
// model's, model_drafter.h); the guesses ride in the rows after
// that token, in the same row-wise call, and are checked as the request samples: the sampler draws
// from the decode token's row as it always does, and while the drawn token equals the next guess,
// the guess's row already holds the logits of the position after it, so the request draws again
// from there. The first draw that differs (or the draw after the last guess) is kept too, and the
// cells of the guesses after it are cut from the sequence.
//
// Invariants: every emitted token is the sampler's draw from the model's row for its position, in
// order, one draw per token — the tokens, and at temperature > 0 the random draws, are those of
// the same request without drafts whenever each row is computed as it would be without them (the
// row-wise calls; docs/design.md, "Speculative decoding"). A request's sequence never keeps a
// cell past its last accepted token once its step is over. Drafts take only cells nothing else
// needs (RequestLife::spare_cells): they never push a cached prefix out.
#include "scheduler/scheduler_impl.h"

#include "cache/family.h"

#include <algorithm>
#include <filesystem>
#include <format>
#include <spdlog/spdlog.h>
#include <stdexcept>

namespace prefixd::scheduler {

using engine::Token;

namespace {

std::string owner_key(const cache::ScopeId& scope) { return std::string(scope.begin(), scope.end()); }

// A draft model's guesses repeat no matched text; their prior chance is even (match / (match + 2)
// in DraftRecord::acceptance) until the request's own verifications say otherwise.
constexpr std::int32_t kModelDraftPriorMatch = 2;

}  // namespace

// How a rejected draft leaves a sequence is the model family's (cache::Family::draft_rollback):
// cut from the sequence's end, or the state before it restored.
void Scheduler::Impl::set_up_speculation(engine::Engine* drafter) {
  const SpeculationOptions& o = options_.speculation;
  if (o.type == SpeculationOptions::Type::none) {
    spdlog::info("speculation: off");
    return;
  }
  const engine::ModelInfo& model = engine_.model();
  rollback_by_checkpoint_ = cache::Family::of(model)->draft_rollback() == cache::DraftRollback::checkpoint;
  if (rollback_by_checkpoint_ && model.recurrence_in_chunks) {
    spdlog::warn("speculation: off for this {} model: its recurrent layers compute a call's tokens as one chunk, "
                 "so a verified draft would not be computed as the same tokens decoded one by one",
                 model.architecture);
    rollback_by_checkpoint_ = false;
    return;
  }
  if (o.type == SpeculationOptions::Type::model) {
    if (drafter == nullptr) throw std::invalid_argument("speculation by a draft model needs the draft model's engine");
    // The drafter's lanes are cut back after each verification like the target's sequences, and
    // its cache needs sequences of its own beside them.
    if (!cache::Family::of(drafter->model())->can_draft()) {
      throw std::invalid_argument(std::format("the draft model must be a dense attention model, not {}",
                                              engine::family_name(drafter->model().family)));
    }
    const std::int32_t holders =
        std::clamp(drafter->sequence_count() - options_.n_slots - 1, 0, options_.cache_holders);
    const engine::Token shared_tokens = std::min(engine_.vocab().size(), drafter->vocab().size());
    // Its host tier holds the same prompts as the target's, at its own bytes per token.
    cache::CacheConfig config = options_.cache;
    const double ratio = model.kv_bytes_per_token > 0 ? static_cast<double>(drafter->model().kv_bytes_per_token) /
                                                            static_cast<double>(model.kv_bytes_per_token)
                                                      : 1.0;
    config.host_capacity_bytes = static_cast<std::uint64_t>(static_cast<double>(config.host_capacity_bytes) * std::min(ratio, 1.0));
    // Its disk tier is a directory of its own inside the target's: a disk store removes the records
    // of every other model from its directory.
    if (!config.disk_path.empty()) {
      config.disk_path = (std::filesystem::path(config.disk_path) / kDraftModelDiskDirectory).string();
      config.disk_capacity_bytes =
          static_cast<std::uint64_t>(static_cast<double>(config.disk_capacity_bytes) * std::min(ratio, 1.0));
    }
    drafter_ = std::make_unique<ModelDrafter>(*drafter, config, options_.n_slots, holders, shared_tokens, step_clock_);
    speculation_ = true;
    spdlog::info("speculation: draft model {} guesses {} to {} tokens{}, each ending below probability {}; its prompt "
                 "cache keeps {} sequences in {} cells",
                 drafter->model().architecture, o.draft_min, o.draft_max,
                 o.only_paying ? " where the measured costs say they pay" : " (every guess)", o.p_min, holders,
                 drafter->context_size());
    return;
  }
  speculation_ = true;
  spdlog::info("speculation: n-gram drafts of {} to {} tokens{}, from each request's own tokens and the last {} "
               "tokens of replies its namespace produced",
               o.draft_min, o.draft_max, o.only_paying ? " where the measured costs say they pay" : " (every guess)",
               o.pool_tokens);
}

// The rows a request may add to its decode token: its call holds at most the row-wise bound.
void Scheduler::Impl::start_drafting(Active& a) {
  if (!speculation_ || a.request.prefill_only || a.request.embed != EmbedMode::none) return;
  const SpeculationOptions& o = options_.speculation;
  const std::int32_t call_rows = engine_.rowwise_rows() > 0 ? engine_.rowwise_rows() : engine_.batch_size();
  const std::int32_t most = std::min(a.request.speculative.n_max.value_or(o.draft_max), call_rows - 1);
  if (most <= 0) return;
  const std::int32_t fewest = std::clamp(a.request.speculative.n_min.value_or(o.draft_min), 1, most);
  a.drafting = Active::DraftLimits{most, fewest};
}

// Each generating request's guess, as long as it pays (speculative::best_draft_length): the rows
// of this step's calls so far (every sampled row, and the drafts planned before it) are what its
// rows slow down.
void Scheduler::Impl::plan_drafts() {
  if (!speculation_) return;
  std::int64_t spare = life().spare_cells(running_cells());
  std::int32_t rows = 0;
  for (const auto& a : active_) rows += has_sampled_row(*a) ? sampled_rows(*a) : 0;
  if (drafter_) {
    plan_model_drafts(spare, rows);
    return;
  }
  for (auto& a : active_) {
    a->draft.clear();
    const std::int64_t most = draft_room(*a, spare);
    if (most < 1 || most < a->drafting->fewest) continue;
    speculative::Draft draft = speculative::draft_ngram(a->tokens, a->uses_cache() ? &outputs_ : nullptr,
                                                        a->request.cache.namespace_digest,
                                                        static_cast<std::int32_t>(most), a->drafting->fewest);
    if (draft.tokens.empty()) continue;
    const auto guessed = static_cast<std::int32_t>(draft.tokens.size());
    const std::int32_t length =
        options_.speculation.only_paying
            ? speculative::best_draft_length(row_costs_, a->drafts.acceptance(draft.match), rows - 1,
                                             a->drafting->fewest, guessed)
            : guessed;
    if (length == 0) continue;
    draft.tokens.resize(static_cast<std::size_t>(length));
    spare -= length;
    rows += length;
    a->draft = std::move(draft.tokens);
  }
}

// The most tokens a request may guess this step (0: none): its limits, the reply's (a step yields
// at most one token past the draft), the context's, and the spare cells.
std::int64_t Scheduler::Impl::draft_room(const Active& a, std::int64_t spare) const {
  if (!a.drafting || !a.decoding() || a.warming) return 0;
  if (static_cast<std::size_t>(a.n_past) + 1 != a.tokens.size()) return 0;
  std::int64_t most = a.drafting->most;
  most = std::min<std::int64_t>(most, a.max_new - a.generated - 1);
  most = std::min<std::int64_t>(most, engine_.context_size() - static_cast<std::int64_t>(a.tokens.size()) - 1);
  return std::max<std::int64_t>(0, std::min(most, spare));
}

// A draft model guesses for every request at once (its calls are shared); each asks for as many
// tokens as pay at its measured acceptance, counting the drafter's time per guess.
void Scheduler::Impl::plan_model_drafts(std::int64_t spare, std::int32_t rows) {
  std::vector<ModelDrafter::Job> jobs;
  std::vector<Active*> owners;
  for (auto& a : active_) {
    a->draft.clear();
    if (!a->request.images.empty()) continue;  // the drafter cannot read an image's rows
    const std::int64_t most = draft_room(*a, spare);
    if (most < 1 || most < a->drafting->fewest) continue;
    const auto guessed = static_cast<std::int32_t>(most);
    const std::int32_t length =
        options_.speculation.only_paying
            ? speculative::best_draft_length(row_costs_, a->drafts.acceptance(kModelDraftPriorMatch), rows - 1,
                                             a->drafting->fewest, guessed, drafter_->seconds_per_guess())
            : guessed;
    if (length == 0) continue;
    spare -= length;
    rows += length;
    jobs.push_back({.lane = a->seq,
                    .context = a->tokens,
                    .prompt = a->n_prompt,
                    .key = nullptr,
                    .most = length,
                    .p_min = a->request.speculative.p_min.value_or(options_.speculation.p_min)});
    owners.push_back(a.get());
  }
  if (jobs.empty()) return;
  std::vector<cache::RequestKey> keys;
  keys.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    keys.push_back(cache_key(owners[i]->request.cache));
    if (owners[i]->uses_cache()) jobs[i].key = &keys.back();
  }
  drafter_->draft(jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    // A draft shorter than the request's least is not verified (the drafter stopped early).
    if (static_cast<std::int32_t>(jobs[i].guesses.size()) >= owners[i]->drafting->fewest) {
      owners[i]->draft = std::move(jobs[i].guesses);
    }
  }
}

// Samples the request at `index` through its decode token's row and its draft's rows (see the top
// of this file); moves `index` as settle() does.
void Scheduler::Impl::verify_draft(size_t& index) {
  Active& a = *active_[index];
  const std::vector<Token> draft = std::exchange(a.draft, {});
  const auto drafted = static_cast<std::int32_t>(draft.size());
  std::int32_t accepted = 0;
  // Cells of guesses past the last token taken (positions from n_past on). A recurrent state
  // consumed them all: it is rolled back to before the call once every request of it has drawn
  // (roll_back_states), and a request that ends here ends then.
  const std::int32_t call_start = a.n_past - 1;
  const auto cut_guesses = [&] {
    if (rollback_by_checkpoint_) a.rollback_from = call_start;
    else engine_.remove_sequence(a.seq, a.n_past, -1);
  };
  for (std::int32_t j = 0;; ++j) {
    const std::int32_t row = a.row + j;
    const std::optional<Token> token = a.sampler->sample_quick(row);
    if (!token) {
      // The grammar refused the quick draw: the rest is drawn off this thread (sample_all).
      cut_guesses();
      count_verification(a, drafted, accepted);
      defer_draw(a, row);
      ++index;
      return;
    }
    const bool guessed = j < drafted && *token == draft[static_cast<std::size_t>(j)];
    if (!guessed && j < drafted) cut_guesses();
    accepted += guessed ? 1 : 0;
    const bool more = take_token(a, *token, engine_.logits(row));
    if (more && guessed) {
      a.n_past += 1;  // the guess's cell holds the token just taken
      if (a.uses_cache()) {
        const StepClock::Scope in_cache = step_clock_.enter(StepPhase::cache);
        life().advance(a.seq, a.n_past);
      }
      continue;
    }
    if (guessed) cut_guesses();
    count_verification(a, drafted, accepted);
    if (!more && a.rollback_from >= 0) {
      a.ends_after_rollback = true;
      ++index;
      return;
    }
    settle(index, more);
    return;
  }
}

// Recurrent and hybrid models: each request whose guesses were not all taken gets its state from
// before the call back (the checkpoint sampled_calls saved) and computes the tokens it took again,
// in one call for all of them, after every request of the call drew from its rows.
void Scheduler::Impl::roll_back_states() {
  std::vector<engine::BatchToken> redo;
  for (auto& a : active_) {
    if (a->rollback_from < 0) continue;
    engine_.drop_checkpoint_state(a->seq);
    engine_.remove_sequence(a->seq, a->rollback_from, -1);
    if (!engine_.restore_checkpoint(a->state_before_draft, a->seq)) {
      a->rollback_failed = true;
      continue;
    }
    for (std::int32_t pos = a->rollback_from; pos < a->n_past; ++pos) {
      redo.push_back({a->tokens[static_cast<size_t>(pos)], pos, a->seq, false});
    }
  }
  const bool computed = redo.empty() || [&] {
    const StepClock::Scope in_model = step_clock_.enter(StepPhase::compute);
    return engine_.decode(redo) == engine::DecodeStatus::ok;
  }();
  for (size_t i = 0; i < active_.size();) {
    Active& a = *active_[i];
    if (a.rollback_from < 0) {
      ++i;
      continue;
    }
    a.rollback_from = -1;
    a.state_before_draft.clear();
    if (!computed || std::exchange(a.rollback_failed, false)) {
      finish(i, FinishReason::error, "the model's state could not be rolled back after a draft");
      continue;
    }
    if (std::exchange(a.ends_after_rollback, false)) {
      settle(i, false);
      continue;
    }
    ++i;
  }
}

void Scheduler::Impl::count_verification(Active& a, std::int32_t drafted, std::int32_t accepted) {
  a.drafts.observe(drafted, accepted);
  std::lock_guard lock(mutex_);
  stats_.draft_tokens_total += drafted;
  stats_.draft_tokens_accepted_total += accepted;
  stats_.verifications_total += 1;
  const auto& bounds = SchedulerStats::kAcceptedBounds;
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (accepted <= bounds[i]) stats_.accepted_buckets[i] += 1;
  }
}

// A finished reply (cancelled and failed ones too: a client that retries gets the same tokens)
// is kept for later requests of its namespace to draft from; cache_prompt: false keeps nothing.
void Scheduler::Impl::remember_output(const Active& a) {
  if (!speculation_ || !a.uses_cache() || a.warming || a.generated < 2) return;
  const auto prompt = std::span<const Token>(a.tokens).first(static_cast<std::size_t>(a.n_prompt));
  const auto output = std::span<const Token>(a.tokens).subspan(static_cast<std::size_t>(a.n_prompt));
  outputs_.remember(a.request.cache.namespace_digest, owner_key(a.request.cache.scope), prompt, output);
  std::lock_guard lock(mutex_);
  stats_.draft_pool_entries = static_cast<std::int64_t>(outputs_.entries());
  stats_.draft_pool_tokens = static_cast<std::int64_t>(outputs_.tokens());
}

void Scheduler::Impl::forget_outputs(const std::optional<cache::ScopeId>& scope) {
  if (scope) {
    outputs_.forget_owner(owner_key(*scope));
  } else {
    outputs_.clear();
  }
  std::lock_guard lock(mutex_);
  stats_.draft_pool_entries = static_cast<std::int64_t>(outputs_.entries());
  stats_.draft_pool_tokens = static_cast<std::int64_t>(outputs_.tokens());
}

}  // namespace prefixd::scheduler
