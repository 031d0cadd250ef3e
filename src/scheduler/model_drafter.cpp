#include "scheduler/model_drafter.h"

#include "cache/prefix_cache.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <spdlog/spdlog.h>

namespace prefixd::scheduler {

using engine::BatchToken;
using engine::DecodeStatus;
using engine::SeqId;
using engine::Token;

namespace {

std::vector<SeqId> holder_ids(std::int32_t lanes, std::int32_t holders) {
  std::vector<SeqId> ids;
  for (SeqId s = 0; s < holders; ++s) ids.push_back(lanes + s);
  return ids;
}

// The most likely token of a row, and whether the drafter gives it at least probability `p_min`
// (the softmax is computed only when a bound is set).
std::pair<Token, bool> top_token(std::span<const float> logits, float p_min) {
  const auto best = std::ranges::max_element(logits);
  const auto token = static_cast<Token>(best - logits.begin());
  if (p_min <= 0) return {token, true};
  double sum = 0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - *best);
  return {token, 1.0 / sum >= p_min};
}

}  // namespace

ModelDrafter::ModelDrafter(engine::Engine& drafter, cache::CacheConfig config, std::int32_t lanes, std::int32_t holders,
                           Token token_limit, StepClock& clock)
    : engine_(drafter), token_limit_(token_limit), clock_(clock), lanes_(static_cast<std::size_t>(lanes)) {
  // No shared tier: its keys are the request's namespace and block hashes, which name the target's
  // K/V there. (The disk tier, when the caller set one, is a directory of the drafter's own.)
  config.remote_urls.clear();
  config.enabled = config.enabled && holders > 0;
  cache_ = std::make_unique<cache::PrefixCache>(engine_, config, holder_ids(lanes, holders),
                                                config.enabled ? lanes + holders : -1);
  cache_enabled_ = cache().config().enabled;
}

ModelDrafter::~ModelDrafter() = default;

cache::CacheOperations& ModelDrafter::cache() { return *cache_; }
const cache::CacheOperations& ModelDrafter::cache() const { return *cache_; }
cache::RequestLife& ModelDrafter::life() { return *cache_; }

std::int64_t ModelDrafter::running_cells() const {
  std::int64_t cells = 0;
  for (const Lane& lane : lanes_) cells += lane.open ? static_cast<std::int64_t>(lane.held.size()) : 0;
  return cells;
}

DecodeStatus ModelDrafter::decode(std::span<const BatchToken> batch) {
  const StepClock::Scope in_model = clock_.enter(StepPhase::compute);
  DecodeStatus status = engine_.decode(batch);
  // Idle cached prefixes give way, once; the lanes then hold what they held before the call.
  if (status == DecodeStatus::no_kv_space) {
    bool made_room = false;
    {
      const StepClock::Scope in_cache = clock_.enter(StepPhase::cache);
      made_room = life().release_device_cells(static_cast<std::int64_t>(batch.size())) > 0;
    }
    if (made_room) status = engine_.decode(batch);
  }
  return status;
}

bool ModelDrafter::open(Lane& lane, SeqId id, const Job& job) {
  lane = Lane{};
  lane.uses_cache = job.key != nullptr && cache_enabled_;
  cache::Ticket ticket = lane.uses_cache ? life().open(*job.key, job.context, 0, {})
                                         : life().open_bypass(job.key != nullptr ? job.key->scope : cache::ScopeId{});
  const cache::Room room{.running = running_cells(),
                         .need = static_cast<std::int64_t>(job.context.size()) + job.most + 1,
                         .nothing_running = std::ranges::none_of(lanes_, &Lane::open)};
  const cache::Admission got = life().admit(ticket, id, room);
  if (got.kind == cache::Admission::Kind::lookup_pending) life().abandon(ticket);  // no shared tier: not reached
  if (got.kind != cache::Admission::Kind::ready && got.kind != cache::Admission::Kind::waits_for_prefix) {
    lane.refused = true;
    return false;
  }
  lane.open = true;
  lane.prompt = job.prompt;
  if (got.kind == cache::Admission::Kind::waits_for_prefix) {
    lane.waiting = true;
    lane.admitted.assign(job.context.begin(), job.context.end());
    return true;
  }
  const auto reused = static_cast<std::size_t>(got.acquisition.reused);
  lane.held.assign(job.context.begin(), job.context.begin() + static_cast<std::ptrdiff_t>(reused));
  lane.confirmed = reused;
  lane.report.cached_tokens = std::min(got.acquisition.reused, lane.prompt);
  return true;
}

void ModelDrafter::take_resolved() {
  for (const cache::Resolved& r : life().take_resolved()) {
    Lane& lane = lanes_[static_cast<std::size_t>(r.seq)];
    // The cache put the first `reused` tokens of what the lane was admitted with there.
    const std::size_t reused = std::min(lane.admitted.size(), static_cast<std::size_t>(r.acquisition.reused));
    lane.waiting = false;
    lane.held.assign(lane.admitted.begin(), lane.admitted.begin() + static_cast<std::ptrdiff_t>(reused));
    lane.admitted.clear();
    lane.confirmed = reused;
    lane.report.cached_tokens = std::min(static_cast<std::int32_t>(reused), lane.prompt);
  }
}

bool ModelDrafter::settle(Lane& lane, SeqId id, std::span<const Token> context) {
  // Read all of it already (the context has not grown since): no row to guess from this step.
  if (lane.confirmed >= context.size()) return false;
  std::size_t keep = lane.confirmed;
  while (keep < lane.held.size() && keep < context.size() && lane.held[keep] == context[keep]) ++keep;
  keep = std::min(keep, context.size() - 1);  // the last token's row gives the first guess
  if (keep < lane.held.size()) {
    engine_.remove_sequence(id, static_cast<engine::Pos>(keep), -1);
    lane.held.resize(keep);
  }
  lane.confirmed = keep;
  if (lane.uses_cache) life().advance(id, static_cast<std::int32_t>(keep));
  return true;
}

void ModelDrafter::draft(std::span<Job> jobs) {
  take_resolved();
  struct Drafting {
    Job* job;
    Lane* lane;
    std::int32_t row = -1;  // the row whose logits give its next guess
  };
  std::vector<Drafting> drafting;
  std::int64_t wanted = 0;
  for (Job& job : jobs) {
    job.guesses.clear();
    Lane& lane = lanes_[static_cast<std::size_t>(job.lane)];
    if (job.context.empty() || job.most <= 0 || lane.refused) continue;
    if (!lane.open && !open(lane, job.lane, job)) continue;
    if (lane.waiting || !settle(lane, job.lane, job.context)) continue;
    drafting.push_back({&job, &lane});
    wanted += static_cast<std::int64_t>(job.context.size()) + job.most;
  }
  if (drafting.empty()) return;
  {
    const StepClock::Scope in_cache = clock_.enter(StepPhase::cache);
    life().make_room_for_step(std::max(wanted, running_cells()));
  }

  // Catch-up: each lane's unread context, in one call of at most a batch; a lane that reads its
  // last token there gets the row of its first guess.
  batch_.clear();
  const auto budget = static_cast<std::size_t>(engine_.batch_size());
  for (Drafting& d : drafting) {
    const std::span<const Token> context = d.job->context;
    const std::size_t first = batch_.size();
    for (std::size_t pos = d.lane->held.size(); pos < context.size() && batch_.size() < budget; ++pos) {
      if (context[pos] < 0 || context[pos] >= token_limit_) {
        // Not a token both models read alike: this request is not drafted for from here on.
        batch_.resize(first);
        d.lane->refused = true;
        d.row = -1;
        break;
      }
      batch_.push_back({context[pos], static_cast<engine::Pos>(pos), d.job->lane, pos + 1 == context.size()});
      if (pos + 1 == context.size()) d.row = static_cast<std::int32_t>(batch_.size()) - 1;
    }
  }
  if (batch_.empty()) return;
  if (decode(batch_) != DecodeStatus::ok) {
    spdlog::warn("draft model: a catch-up call of {} tokens failed; no drafts this step", batch_.size());
    return;
  }
  for (const BatchToken& t : batch_) {
    Lane& lane = lanes_[static_cast<std::size_t>(t.seq)];
    lane.held.push_back(t.token);
    lane.report.fed_tokens += t.pos < lane.prompt ? 1 : 0;
  }
  for (Drafting& d : drafting) {
    d.lane->confirmed = d.lane->held.size();
    if (d.lane->uses_cache) life().advance(d.job->lane, static_cast<std::int32_t>(d.lane->held.size()));
  }
  std::erase_if(drafting, [](const Drafting& d) { return d.row < 0; });

  // Guesses: one token per lane from its row; each guess but the last is fed for the next row.
  const engine::Vocabulary& vocab = engine_.vocab();
  while (!drafting.empty()) {
    for (Drafting& d : drafting) {
      const auto [token, likely] = top_token(engine_.logits(d.row), d.job->p_min);
      const bool done_before = !likely || token >= token_limit_;
      if (!done_before) d.job->guesses.push_back(token);
      const bool last = done_before || vocab.is_end_of_generation(token) ||
                        static_cast<std::int32_t>(d.job->guesses.size()) >= d.job->most;
      d.row = last ? -1 : 0;
    }
    std::erase_if(drafting, [](const Drafting& d) { return d.row < 0; });
    if (drafting.empty()) break;
    batch_.clear();
    for (Drafting& d : drafting) {
      d.row = static_cast<std::int32_t>(batch_.size());
      batch_.push_back({d.job->guesses.back(), static_cast<engine::Pos>(d.lane->held.size()), d.job->lane, true});
    }
    const auto began = std::chrono::steady_clock::now();
    if (decode(batch_) != DecodeStatus::ok) break;  // the guesses so far stand
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    seconds_per_guess_ = seconds_per_guess_ == 0 ? took : 0.9 * seconds_per_guess_ + 0.1 * took;
    for (Drafting& d : drafting) d.lane->held.push_back(d.job->guesses.back());
  }
}

void ModelDrafter::end(SeqId lane_id, std::span<const Token> tokens, bool keep) {
  Lane& lane = lanes_[static_cast<std::size_t>(lane_id)];
  if (lane.open) {
    if (!lane.uses_cache) {
      engine_.remove_sequence(lane_id, 0, -1);  // a bypass lane is not registered
    } else if (keep && !lane.waiting && lane.confirmed <= tokens.size()) {
      // held[0, confirmed) are the request's tokens; the guesses after them that it took too.
      std::size_t verified = lane.confirmed;
      while (verified < lane.held.size() && verified < tokens.size() && lane.held[verified] == tokens[verified]) ++verified;
      if (verified < lane.held.size()) engine_.remove_sequence(lane_id, static_cast<engine::Pos>(verified), -1);
      life().advance(lane_id, static_cast<std::int32_t>(verified));
      life().donate(lane_id, tokens.first(verified));
    } else {
      life().release(lane_id);
    }
  }
  lane = Lane{};
}

ModelDrafter::LaneReport ModelDrafter::report(SeqId lane) const { return lanes_[static_cast<std::size_t>(lane)].report; }

void ModelDrafter::tick() { life().tick(std::ranges::none_of(lanes_, &Lane::open)); }

}  // namespace prefixd::scheduler
