#include "cache/reuse_planner.h"

#include <algorithm>
#include <array>
#include <spdlog/spdlog.h>

#include "cache/reuse_plan.h"

namespace prefixd::cache {

using engine::SeqId;
using engine::Token;

ReusePlanner::ReusePlanner(const Tiers& tiers, CacheCounters& counters, const std::map<engine::SeqId, Lease>& leases,
                           engine::SeqId pin, std::function<void()> make_room)
    : tiers_(tiers), counters_(counters), leases_(leases), pin_(pin), make_room_(std::move(make_room)) {}

Acquisition ReusePlanner::acquire(Lease& lease) {
  if (tiers_.trimmable()) return adopt_cells(lease);
  const Acquisition got = adopt_state(lease);
  plan_stops(lease);
  return got;
}

HostTier::Plan ReusePlanner::plan_with_disk(const Lineage& lineage, std::span<const engine::Token> query,
                                            std::int32_t on_device, std::int32_t beat, std::int32_t& host_only) {
  HostStore::Evicted evicted;
  HostTier::Plan plan = tiers_.backing.plan_with_disk(lineage, query, on_device, beat, host_only, evicted);
  counters_.count_evictions(evicted);
  return plan;
}

ReusePlanner::RunningOffer ReusePlanner::running_offer(const Lease& lease, std::span<const engine::Token> query,
                                                                 bool may_wait) const {
  RunningOffer best;
  for (const auto& [seq, other] : leases_) {
    if (seq == lease.seq || other.lineage.ns != lease.lineage.ns || !tiers_.device.holds_its_start(seq)) continue;
    // A wait is only ever for an older request, so waits never form a cycle; a request that waits
    // itself has computed nothing to share now.
    if (may_wait ? other.order >= lease.order : other.waits_for.has_value()) continue;
    const std::int32_t common =
        outside_unbroken(lease.key.unbroken, shared_with(lease, other, common_prefix(query, other.prompt)));
    const std::int32_t now = outside_unbroken(lease.key.unbroken, std::min(common, other.computed));
    const bool better = may_wait ? common > best.common || (common == best.common && now > best.now) : now > best.now;
    if (better) best = RunningOffer{&other, common, now};
  }
  return best;
}

void ReusePlanner::copy_from_entry(Lease& lease, EntryId id, std::int32_t length) {
  tiers_.device.copy_into(id, lease.seq, length);
  lock(tiers_.device, lease, length);
}

void ReusePlanner::copy_from_running(Lease& lease, const Lease& other, std::int32_t length) {
  tiers_.engine.copy_sequence(other.seq, lease.seq, 0, length);
  lock(tiers_.device, lease, std::min(length, other.locked));
  counters_.count_inflight_share(lease.key.scope);
}

Acquisition ReusePlanner::adopt_cells(Lease& lease) {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  if (!tiers_.config.enabled || n < 2) return {};
  const auto query = std::span<const engine::Token>(lease.prompt).first(static_cast<size_t>(n - 1));  // one-token guard

  const std::string& ns = lease.lineage.ns;
  const std::span<const UnbrokenSpan> unbroken = lease.key.unbroken;
  RadixTree::Match device = tiers_.config.apc_enabled ? tiers_.device.match(ns, query, lease.session, lease.reach)
                                                      : tiers_.device.match_whole(ns, query, lease.session, lease.reach);
  device.length = outside_unbroken(unbroken, device.length);
  const RunningOffer running = running_offer(lease, query, /*may_wait=*/true);
  std::int32_t host_only = 0;
  HostTier::Plan host_plan =
      plan_with_disk(lease.lineage, query, device.length, std::max(device.length, running.now), host_only);
  if (const std::int32_t cut = outside_unbroken(unbroken, host_plan.length); cut < host_plan.length) {
    host_plan = cut > device.length ? tiers_.host.clip(host_plan, cut) : HostTier::Plan{};
    host_only = std::min(host_only, host_plan.length);
  }
  const std::array offers = {Offer{Source::device, device.length}, Offer{Source::running, running.now},
                             Offer{Source::host, host_plan.length}};
  const std::int32_t best_now = std::max({device.length, running.now, host_plan.length});
  if (running.lease != nullptr &&
      worth_waiting(running.common, running.lease->computed, best_now, tiers_.config.min_prefix)) {
    lease.waits_for = running.lease->seq;
    lease.wait_until = running.common;
    return Acquisition{.waiting = true};
  }
  const std::optional<Offer> chosen = choose(tiers_.mode, offers, tiers_.config.min_prefix);
  const Source source = chosen ? chosen->source : Source::device;
  Acquisition got;
  // A host restore also takes the device's part of the prefix from its cells.
  if (chosen && (source == Source::device || (source == Source::host && device.length > 0))) {
    copy_from_entry(lease, device.entry, device.length);
    const bool whole = device.length == static_cast<std::int32_t>(tiers_.device.entry(device.entry).tokens.size()) ||
                       device.length == n - 1;
    got = Acquisition{whole ? Outcome::hit_extend : Outcome::partial, device.length, Tier::device, device.in_session};
  } else if (chosen && source == Source::running) {
    const Lease& other = *running.lease;
    copy_from_running(lease, other, running.now);
    const bool whole = running.now == static_cast<std::int32_t>(other.prompt.size()) || running.now == n - 1;
    got = Acquisition{whole ? Outcome::hit_extend : Outcome::partial, running.now, Tier::device,
                      lease.reach.own && other.session == lease.session};
  }
  make_room_();
  if (chosen && source == Source::host) {
    const std::int32_t from = got.reused;
    std::int32_t held = tiers_.host.restore(host_plan, lease.seq, from, counters_.totals.failed_restores, pin_);
    // A segment that failed may leave the prefix inside an unbroken span: cut it back to its start
    // (never below `from`, which is outside every span).
    if (const std::int32_t cut = outside_unbroken(unbroken, held); cut < held) {
      tiers_.engine.remove_sequence(lease.seq, cut, -1);
      held = cut;
    }
    if (held >= tiers_.config.min_prefix && held > from) {
      const Tier tier = credited_tier(held, Provenance{.device = from, .host = host_only, .remote_from = lease.remote_from});
      // Under session isolation a restore past the shared prefix can only be the session's own.
      got = Acquisition{Outcome::hit_restore, held, tier, lease.reach.own && held > lease.reach.others};
    } else {
      got = Acquisition{};
      unlock(tiers_.device, lease);
      tiers_.engine.remove_sequence(lease.seq, 0, -1);
    }
  }
  if (got.reused > 0 && !tiers_.device.holds_its_start(lease.seq, got.reused)) {
    // A source lost cells between the checks and the copy: never compute on a broken prefix.
    const engine::PosRange cells = tiers_.engine.sequence_positions(lease.seq);
    spdlog::warn("cache: a reused prefix of {} tokens ({}, {}) held positions {}..{} only; the request runs cold",
                 got.reused, outcome_name(got.outcome), tier_name(got.tier), cells.min, cells.max);
    unlock(tiers_.device, lease);
    tiers_.engine.remove_sequence(lease.seq, 0, -1);
    got = Acquisition{};
  }
  lease.computed = got.reused;
  return got;
}

Acquisition ReusePlanner::adopt_state(Lease& lease) {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  const Lineage& lineage = lease.lineage;
  lease.chain = tiers_.hasher.chain(lineage, lease.prompt);
  if (!tiers_.config.enabled || n < 2) return {};
  const auto query = std::span<const engine::Token>(lease.prompt).first(static_cast<size_t>(n - 1));  // one-token guard

  // An entry whose state is kept at its end, and that the prompt extends; and the longest entry
  // whose cells serve the attention layers before a checkpoint.
  StateOffers at;
  at.whole = tiers_.device.match_whole(lineage.ns, query, lease.session, lease.reach);
  at.device = tiers_.device.match(lineage.ns, query, lease.session, lease.reach);
  if (at.whole.length > 0 && !tiers_.device.entry(at.whole.entry).state_at_end) at.whole = {};
  // A checkpoint, with the attention cells before it from the device tier, another running
  // sequence (whose cells before what it has computed are final), or the host tier.
  const bool attention = engine::has_attention_cells(tiers_.engine.model());
  std::int32_t limit = n - 1;
  if (attention) {
    at.running = running_offer(lease, query, /*may_wait=*/false);
    const HostTier::Plan host_plan = plan_with_disk(lineage, query, at.device.length, 0, at.host_only);
    limit = std::max({at.device.length, at.running.now, host_plan.length});
  }
  at.checkpoint = tiers_.checkpoints.find(lineage, query, lease.chain, limit);
  // Where this prompt leaves what another one has or is computing: a branch of the tree, where the
  // next conversation will likely leave it too (after a system prompt that no turn boundary ends).
  lease.branch = std::max(at.device.length, at.running.common);
  if (lease.branch >= n - 1) lease.branch = 0;
  at.in_memory = std::max(at.whole.length, at.checkpoint.position);
  at.promoted = tiers_.backing.promote_checkpoint(lineage, query, lease.chain, at.in_memory, limit, lease.session, lease.key.scope);
  if (at.promoted) at.checkpoint = tiers_.checkpoints.find(lineage, query, lease.chain, limit);
  // A window-only model: an entry whose holder still has the window before the matched length
  // is the state there, as a checkpoint would be (the window is known unbroken from window_from).
  std::int32_t window_reach = 0;
  if (tiers_.device.window_only() && at.device.length > 0 &&
      outside_unbroken(lease.key.unbroken, at.device.length) == at.device.length &&
      tiers_.device.window_run(tiers_.device.entry(at.device.entry).holder, tiers_.device.entry(at.device.entry).window_from) <=
          at.device.length - tiers_.engine.model().sliding_window + 1) {
    window_reach = at.device.length;
  }

  const std::array offers = {Offer{Source::entry_state, at.whole.length},
                             Offer{Source::checkpoint, at.checkpoint.position}, Offer{Source::window, window_reach}};
  const std::optional<Offer> chosen = choose(tiers_.mode, offers, tiers_.config.min_prefix);
  Acquisition got;
  if (chosen && chosen->source == Source::window) {
    copy_from_entry(lease, at.device.entry, window_reach);
    lease.window_from = tiers_.device.entry(at.device.entry).window_from;
    got = Acquisition{Outcome::partial, window_reach, Tier::device, at.device.in_session};
    make_room_();
  } else if (chosen && chosen->source == Source::entry_state) {
    copy_from_entry(lease, at.whole.entry, at.whole.length);
    lease.window_from = tiers_.device.entry(at.whole.entry).window_from;
    got = Acquisition{Outcome::hit_extend, at.whole.length, Tier::device, at.whole.in_session};
    make_room_();
  } else if (chosen && chosen->source == Source::checkpoint) {
    got = resume_at_checkpoint(lease, at);
  } else {
    make_room_();
  }
  tiers_.checkpoints.classify_refusal(lease.session, lineage, query, lease.chain, got.reused);
  lease.computed = got.reused;
  return got;
}

Acquisition ReusePlanner::resume_at_checkpoint(Lease& lease, const StateOffers& at) {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  const auto query = std::span<const engine::Token>(lease.prompt).first(static_cast<size_t>(n - 1));
  const Lineage& lineage = lease.lineage;
  const bool attention = engine::has_attention_cells(tiers_.engine.model());
  const std::int32_t wanted = at.checkpoint.position;
  // The attention cells before the checkpoint: another request's (sharing them is free, a host
  // restore is a copy) when the device tier falls short of it, else the device tier's.
  std::int32_t from_device = attention ? std::min(at.device.length, wanted) : 0;
  if (attention && from_device < wanted && at.running.now >= wanted) {
    from_device = wanted;
    copy_from_running(lease, *at.running.lease, from_device);
  } else if (from_device > 0) {
    copy_from_entry(lease, at.device.entry, from_device);
  }
  make_room_();
  // The demotions may have moved segments and checkpoints around (a budget can evict what was
  // planned): the plan is made again from what the tiers hold now.
  std::int32_t reach = from_device;
  HostTier::Plan host_plan;
  if (attention) {
    host_plan = tiers_.host.plan(lineage, query, from_device);
    reach = std::max(from_device, host_plan.length);
  }
  const CheckpointStore::Found now = tiers_.checkpoints.find(lineage, query, lease.chain, attention ? reach : n - 1);
  const std::int32_t k = now.position;
  bool ok = k >= tiers_.config.min_prefix;
  if (ok && k < from_device) {
    // Resume earlier than the cells adopted: without its partial state the sequence can be cut.
    tiers_.engine.drop_checkpoint_state(lease.seq);
    tiers_.engine.remove_sequence(lease.seq, k, -1);
    lock(tiers_.device, lease, k);
  }
  if (ok && attention && from_device < k) {
    ok = tiers_.host.restore(tiers_.host.clip(host_plan, k), lease.seq, from_device, counters_.totals.failed_restores, pin_) >= k;
  }
  // The attention cells are in place; the checkpoint replaces the partial state they came with.
  ok = ok && tiers_.engine.restore_checkpoint(now.checkpoint->state, lease.seq);
  if (!ok) {
    if (k >= tiers_.config.min_prefix) {
      counters_.totals.failed_restores += 1;
      spdlog::warn("cache: the checkpoint at position {} could not be restored; the request runs cold", k);
      tiers_.checkpoints.erase(now.key);
    }
    unlock(tiers_.device, lease);
    tiers_.engine.remove_sequence(lease.seq, 0, -1);
    return {};
  }
  lease.window_from = std::min(now.checkpoint->window_from, k);
  tiers_.checkpoints.used(now.key, lease.session);
  const Tier tier = credited_tier(k, Provenance{.device = from_device,
                                                .host = at.host_only,
                                                .state_restored = true,
                                                .state_from_disk = at.promoted && k > at.in_memory,
                                                .remote_from = lease.remote_from});
  return Acquisition{from_device >= k ? Outcome::partial : Outcome::hit_restore, k, tier, false};
}

std::vector<engine::Pos> ReusePlanner::checkpoint_positions(const RequestKey& key, std::int32_t n) const {
  std::vector<engine::Pos> positions(key.boundaries.begin(), key.boundaries.end());
  // The session wall: a checkpoint there is addressed as the namespace's (it does not cover the
  // fork), so every session of the namespace may resume at the end of the shared prefix.
  if (key.shared_prefix != kNoFork && key.shared_prefix > 0) positions.push_back(key.shared_prefix);
  if (tiers_.config.checkpoint_every > 0) {
    for (engine::Pos p = tiers_.config.checkpoint_every; p < n; p += tiers_.config.checkpoint_every) positions.push_back(p);
  }
  positions.push_back(n);      // the next turn, which extends the whole prompt, feeds only what is new
  if (const std::int32_t k = tiers_.config.checkpoint_alignment; k > 0) {
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
    return p <= lease.computed || p > n || p < tiers_.config.min_prefix || p > reusable ||
           outside_unbroken(lease.key.unbroken, p) != p ||
           tiers_.checkpoints.contains(tiers_.checkpoints.key_of(lease.lineage, lease.prompt, lease.chain, p));
  });
  lease.stops = std::move(stops);
}

}  // namespace prefixd::cache
