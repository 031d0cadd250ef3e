#include "cache/reuse_planner.h"

#include <algorithm>
#include <stdexcept>
#include <spdlog/spdlog.h>

#include "cache/reuse_plan.h"

namespace prefixd::cache {

using engine::SeqId;
using engine::Token;

ReusePlanner::ReusePlanner(const CacheConfig& config, const Family& family, engine::Engine& engine,
                           const BlockHasher& hasher, DeviceTier& device, HostTier& host, CheckpointStore& checkpoints,
                           BackingTiers& backing, CacheCounters& counters, const std::map<engine::SeqId, Lease>& leases,
                           engine::SeqId pin, std::function<void()> make_room)
    : config_(config), family_(family), engine_(engine), hasher_(hasher), device_(device), checkpoints_(checkpoints),
      copies_(engine, device, counters, std::move(make_room)),
      entries_(config, device, copies_),
      running_(family, device, leases, copies_),
      host_segments_(config, engine, entries_, device, host, backing, counters, copies_, pin),
      states_(device, copies_),
      saved_states_(config, family, engine, device, host, checkpoints, backing, counters, running_, copies_, pin),
      windows_(family, device, copies_) {}

ReuseSource& ReusePlanner::source(Source kind) {
  switch (kind) {
    case Source::device: return entries_;
    case Source::running: return running_;
    case Source::host: return host_segments_;
    case Source::entry_state: return states_;
    case Source::checkpoint: return saved_states_;
    case Source::window: return windows_;
  }
  throw std::logic_error("unknown reuse source");
}

std::vector<SourceOffer> ReusePlanner::offers(const ReuseQuery& query) {
  std::vector<SourceOffer> out;
  for (const Source kind : family_.sources()) out.push_back(source(kind).offer(query));
  return out;
}

Acquisition ReusePlanner::acquire(Lease& lease) {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  if (!family_.trimmable()) lease.chain = hasher_.chain(lease.lineage, lease.prompt);
  if (!config_.enabled || n < 2) {
    if (!family_.trimmable()) plan_stops(lease);
    return {};
  }
  const auto query = std::span<const engine::Token>(lease.prompt).first(static_cast<size_t>(n - 1));  // one-token guard
  Acquisition got = choose_and_adopt(lease, query);
  if (got.waiting) return got;
  if (family_.trimmable() && got.reused > 0 && !device_.holds_its_start(lease.seq, got.reused)) {
    // A source lost cells between the checks and the copy: never compute on a broken prefix.
    const engine::PosRange cells = engine_.sequence_positions(lease.seq);
    spdlog::warn("cache: a reused prefix of {} tokens ({}, {}) held positions {}..{} only; the request runs cold",
                 got.reused, outcome_name(got.outcome), tier_name(got.tier), cells.min, cells.max);
    unlock(device_, lease);
    engine_.remove_sequence(lease.seq, 0, -1);
    got = Acquisition{};
  }
  lease.computed = got.reused;
  if (!family_.trimmable()) {
    checkpoints_.classify_refusal(lease.session, lease.lineage, query, lease.chain, got.reused);
    plan_stops(lease);
  }
  return got;
}

Acquisition ReusePlanner::choose_and_adopt(Lease& lease, std::span<const engine::Token> query) {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  // Without the disk only when a file the chosen offer counted on did not read back.
  for (const bool with_disk : {true, false}) {
    const std::vector<SourceOffer> offered = offers(ReuseQuery{lease, query, with_disk});
    const auto offer_of = [&](Source kind) -> const SourceOffer& {
      return *std::ranges::find(offered, kind, &SourceOffer::source);
    };
    std::vector<Offer> ranked(offered.begin(), offered.end());
    if (family_.waits_for_running()) {
      const SourceOffer& running = offer_of(Source::running);
      const std::int32_t best_now = std::ranges::max(ranked, {}, &Offer::reach).reach;
      if (running.running != nullptr &&
          worth_waiting(running.running_common, running.running->computed, best_now, config_.min_prefix)) {
        lease.waits_for = running.running->seq;
        lease.wait_until = running.running_common;
        return Acquisition{.waiting = true};
      }
    } else {
      // Where this prompt leaves what another one has or is computing: a branch of the tree, where
      // the next conversation will likely leave it too (after a system prompt that no turn
      // boundary ends).
      const SourceOffer& saved = offer_of(Source::checkpoint);
      lease.branch = std::max(saved.entry.length, saved.running_common);
      if (lease.branch >= n - 1) lease.branch = 0;
    }
    const std::optional<Offer> chosen = choose(family_.sources(), ranked, config_.min_prefix);
    if (!chosen) break;
    if (std::optional<Acquisition> got = source(chosen->source).adopt(lease, offer_of(chosen->source))) return *got;
  }
  copies_.make_room();
  return {};
}

std::vector<engine::Pos> ReusePlanner::checkpoint_positions(const RequestKey& key, std::int32_t n) const {
  std::vector<engine::Pos> positions(key.boundaries.begin(), key.boundaries.end());
  // The session wall: a checkpoint there is addressed as the namespace's (it does not cover the
  // fork), so every session of the namespace may resume at the end of the shared prefix.
  if (key.shared_prefix != kNoFork && key.shared_prefix > 0) positions.push_back(key.shared_prefix);
  if (config_.checkpoint_every > 0) {
    for (engine::Pos p = config_.checkpoint_every; p < n; p += config_.checkpoint_every) positions.push_back(p);
  }
  positions.push_back(n);      // the next turn, which extends the whole prompt, feeds only what is new
  if (const std::int32_t k = config_.checkpoint_alignment; k > 0) {
    for (engine::Pos& p : positions) p = p / k * k;
  }
  positions.push_back(n - 1);  // an identical resend feeds one token
  std::ranges::sort(positions);
  const auto [first, last] = std::ranges::unique(positions);
  positions.erase(first, last);
  return positions;
}

void ReusePlanner::plan_stops(Lease& lease) const {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  std::vector<engine::Pos> stops = checkpoint_positions(lease.key, n);
  // Also where the prompt branches off (a position the shared-tier lookup does not ask for: a
  // checkpoint there serves this server's next conversation).
  if (lease.branch > 0 && !std::ranges::binary_search(stops, lease.branch)) {
    stops.insert(std::ranges::upper_bound(stops, lease.branch), lease.branch);
  }
  // Only positions this request computes, long enough to be worth a restore, not stored already,
  // and, for a request without a session under session isolation, that anyone could reuse.
  const std::int32_t reusable = lease.reach.own ? n : lease.reach.others;
  std::erase_if(stops, [&](engine::Pos p) {
    return p <= lease.computed || p > n || p < config_.min_prefix || p > reusable ||
           outside_unbroken(lease.key.unbroken, p) != p ||
           checkpoints_.contains(checkpoints_.key_of(lease.lineage, lease.prompt, lease.chain, p));
  });
  lease.stops = std::move(stops);
}

}  // namespace prefixd::cache
