// prefixd cache — acquire: the reuse planner's offers gathered from the tiers, the one chosen
// (reuse_plan.h) carried out, and the tier that served it credited.
//
// Each source reports how far it reaches for the prompt: the device tree (an entry's cells, or
// its end state), another running request's cells, the host tier (after promoting what the disk
// holds beyond it; the shared tier's values were adopted into it before), and the checkpoint
// store (after promoting a checkpoint from disk). What the context holds is adopted first; idle
// cells the request does not use are then demoted, before a restore, so restored cells can take
// the freed ones.
#include "cache/prefix_cache_impl.h"
#include "cache/reuse_plan.h"

namespace prefixd::cache {

Acquisition PrefixCache::Impl::acquire(const RequestKey& key, std::span<const Token> prompt, SeqId seq,
                                       RemoteFetch* fetched) {
  if (!config_.enabled) return bypass(key.scope);
  refresh_window_entries();
  Lease& lease = leases_[seq];
  const std::uint64_t order = ++next_order_;
  lease = Lease{seq, order, key, lineage_of(key, order), reach_of(key), session_id(key), {prompt.begin(), prompt.end()}};
  if (fetched != nullptr) {
    // The shared tier's verified values go into the host tier and the checkpoint store first.
    HostStore::Evicted evicted;
    const auto guarded = prompt.first(prompt.size() - std::min<size_t>(prompt.size(), 1));  // one-token guard
    lease.remote_from = backing_.adopt_fetched(*fetched, lease.lineage, guarded, lease.session, key.scope, evicted);
    add_evictions(evicted);
  }
  Acquisition got;
  if (trimmable()) {
    got = adopt_cells(lease);
  } else {
    got = adopt_state(lease);
    plan_stops(lease);
  }
  if (!got.waiting) record(got, key.scope);
  trace("acquire seq={} ns={} session='{}' prompt={} -> {} reused={} tier={}{}", seq, short_hex(key.namespace_digest),
        key.session, prompt.size(), outcome_name(got.outcome), got.reused, tier_name(got.tier),
        got.waiting ? " (waiting)" : "");
  publish();
  return got;
}

Acquisition PrefixCache::Impl::bypass(const ScopeId& scope) {
  Acquisition got{Outcome::bypass};
  record(got, scope);
  publish();
  return got;
}

std::vector<Resolved> PrefixCache::Impl::poll() {
  std::vector<Resolved> out;
  std::vector<Lease*> waiting;
  for (auto& [seq, lease] : leases_) {
    if (lease.waits_for) waiting.push_back(&lease);
  }
  std::ranges::sort(waiting, [](const Lease* a, const Lease* b) { return a->order < b->order; });
  if (!waiting.empty()) refresh_window_entries();
  for (Lease* lease : waiting) {
    auto target = leases_.find(*lease->waits_for);
    const bool ready = target == leases_.end() || target->second.computed >= lease->wait_until;
    if (!ready) continue;
    lease->waits_for.reset();
    const Acquisition got = adopt_cells(*lease);
    if (got.waiting) continue;
    record(got, lease->key.scope);
    trace("resolved seq={} -> {} reused={}", lease->seq, outcome_name(got.outcome), got.reused);
    out.push_back(Resolved{lease->seq, got});
  }
  if (!out.empty()) publish();
  return out;
}

PrefixCache::Impl::RunningOffer PrefixCache::Impl::running_offer(const Lease& lease, std::span<const Token> query,
                                                                 bool may_wait) const {
  RunningOffer best;
  for (const auto& [seq, other] : leases_) {
    if (seq == lease.seq || other.lineage.ns != lease.lineage.ns || !holds_its_start(seq)) continue;
    // A wait is only ever for an older request, so waits never form a cycle; a request that waits
    // itself has computed nothing to share now.
    if (may_wait ? other.order >= lease.order : other.waits_for.has_value()) continue;
    const std::int32_t common = shared_with(lease, other, common_prefix(query, other.prompt));
    const std::int32_t now = std::min(common, other.computed);
    const bool better = may_wait ? common > best.common || (common == best.common && now > best.now) : now > best.now;
    if (better) best = RunningOffer{&other, common, now};
  }
  return best;
}

void PrefixCache::Impl::copy_from_entry(Lease& lease, EntryId id, std::int32_t length) {
  device_.copy_into(id, lease.seq, length);
  lock(lease, length);
}

void PrefixCache::Impl::copy_from_running(Lease& lease, const Lease& other, std::int32_t length) {
  engine_.copy_sequence(other.seq, lease.seq, 0, length);
  lock(lease, std::min(length, other.locked));
  stats_.inflight_shares += 1;
  scope_counters_[lease.key.scope].inflight_shares += 1;
}

Acquisition PrefixCache::Impl::adopt_cells(Lease& lease) {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  if (!can_reuse() || n < 2) return {};
  const auto query = std::span<const Token>(lease.prompt).first(static_cast<size_t>(n - 1));  // one-token guard

  const std::string& ns = lease.lineage.ns;
  const RadixTree::Match device = config_.apc_enabled ? device_.match(ns, query, lease.session, lease.reach)
                                                      : device_.match_whole(ns, query, lease.session, lease.reach);
  const RunningOffer running = running_offer(lease, query, /*may_wait=*/true);
  std::int32_t host_only = 0;
  const HostTier::Plan host_plan =
      plan_with_disk(lease.lineage, query, device.length, std::max(device.length, running.now), host_only);
  const std::array offers = {Offer{Source::device, device.length}, Offer{Source::running, running.now},
                             Offer{Source::host, host_plan.length}};
  const std::int32_t best_now = std::max({device.length, running.now, host_plan.length});
  if (running.lease != nullptr &&
      worth_waiting(running.common, running.lease->computed, best_now, config_.min_prefix)) {
    lease.waits_for = running.lease->seq;
    lease.wait_until = running.common;
    return Acquisition{.waiting = true};
  }
  const std::optional<Offer> chosen = choose(mode_, offers, config_.min_prefix);
  const Source source = chosen ? chosen->source : Source::device;
  Acquisition got;
  // A host restore also takes the device's part of the prefix from its cells.
  if (chosen && (source == Source::device || (source == Source::host && device.length > 0))) {
    copy_from_entry(lease, device.entry, device.length);
    const bool whole = device.length == static_cast<std::int32_t>(device_.entry(device.entry).tokens.size()) ||
                       device.length == n - 1;
    got = Acquisition{whole ? Outcome::hit_extend : Outcome::partial, device.length, Tier::device, device.in_session};
  } else if (chosen && source == Source::running) {
    const Lease& other = *running.lease;
    copy_from_running(lease, other, running.now);
    const bool whole = running.now == static_cast<std::int32_t>(other.prompt.size()) || running.now == n - 1;
    got = Acquisition{whole ? Outcome::hit_extend : Outcome::partial, running.now, Tier::device,
                      lease.reach.own && other.session == lease.session};
  }
  enforce_running_budget();
  if (chosen && source == Source::host) {
    const std::int32_t from = got.reused;
    const std::int32_t held = host_.restore(host_plan, lease.seq, from, stats_.failed_restores, pin_);
    if (held >= config_.min_prefix && held > from) {
      const Tier tier = credited_tier(held, Provenance{.device = from, .host = host_only, .remote_from = lease.remote_from});
      // Under session isolation a restore past the shared prefix can only be the session's own.
      got = Acquisition{Outcome::hit_restore, held, tier, lease.reach.own && held > lease.reach.others};
    } else {
      got = Acquisition{};
      unlock(lease);
      engine_.remove_sequence(lease.seq, 0, -1);
    }
  }
  if (got.reused > 0 && !holds_its_start(lease.seq, got.reused)) {
    // A source lost cells between the checks and the copy: never compute on a broken prefix.
    const engine::PosRange cells = engine_.sequence_positions(lease.seq);
    spdlog::warn("cache: a reused prefix of {} tokens ({}, {}) held positions {}..{} only; the request runs cold",
                 got.reused, outcome_name(got.outcome), tier_name(got.tier), cells.min, cells.max);
    unlock(lease);
    engine_.remove_sequence(lease.seq, 0, -1);
    got = Acquisition{};
  }
  lease.computed = got.reused;
  return got;
}

Acquisition PrefixCache::Impl::adopt_state(Lease& lease) {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  const Lineage& lineage = lease.lineage;
  lease.chain = hasher_.chain(lineage, lease.prompt);
  if (!can_reuse() || n < 2) return {};
  const auto query = std::span<const Token>(lease.prompt).first(static_cast<size_t>(n - 1));  // one-token guard

  // An entry whose state is kept at its end, and that the prompt extends; and the longest entry
  // whose cells serve the attention layers before a checkpoint.
  StateOffers at;
  at.whole = device_.match_whole(lineage.ns, query, lease.session, lease.reach);
  at.device = device_.match(lineage.ns, query, lease.session, lease.reach);
  if (at.whole.length > 0 && !device_.entry(at.whole.entry).state_at_end) at.whole = {};
  // A checkpoint, with the attention cells before it from the device tier, another running
  // sequence (whose cells before what it has computed are final), or the host tier.
  const bool attention = engine::has_attention_cells(engine_.model());
  std::int32_t limit = n - 1;
  if (attention) {
    at.running = running_offer(lease, query, /*may_wait=*/false);
    const HostTier::Plan host_plan = plan_with_disk(lineage, query, at.device.length, 0, at.host_only);
    limit = std::max({at.device.length, at.running.now, host_plan.length});
  }
  at.checkpoint = checkpoints_.find(lineage, query, lease.chain, limit);
  at.in_memory = std::max(at.whole.length, at.checkpoint.position);
  at.promoted = backing_.promote_checkpoint(lineage, query, lease.chain, at.in_memory, limit, lease.session, lease.key.scope);
  if (at.promoted) at.checkpoint = checkpoints_.find(lineage, query, lease.chain, limit);
  // A window-only model: an entry whose holder still has the window before the matched length
  // is the state there, as a checkpoint would be (the window is known unbroken from window_from).
  std::int32_t window_reach = 0;
  if (window_only() && at.device.length > 0 &&
      window_run(device_.entry(at.device.entry).holder, device_.entry(at.device.entry).window_from) <=
          at.device.length - engine_.model().sliding_window + 1) {
    window_reach = at.device.length;
  }

  const std::array offers = {Offer{Source::entry_state, at.whole.length},
                             Offer{Source::checkpoint, at.checkpoint.position}, Offer{Source::window, window_reach}};
  const std::optional<Offer> chosen = choose(mode_, offers, config_.min_prefix);
  Acquisition got;
  if (chosen && chosen->source == Source::window) {
    copy_from_entry(lease, at.device.entry, window_reach);
    lease.window_from = device_.entry(at.device.entry).window_from;
    got = Acquisition{Outcome::partial, window_reach, Tier::device, at.device.in_session};
    enforce_running_budget();
  } else if (chosen && chosen->source == Source::entry_state) {
    copy_from_entry(lease, at.whole.entry, at.whole.length);
    lease.window_from = device_.entry(at.whole.entry).window_from;
    got = Acquisition{Outcome::hit_extend, at.whole.length, Tier::device, at.whole.in_session};
    enforce_running_budget();
  } else if (chosen && chosen->source == Source::checkpoint) {
    got = resume_at_checkpoint(lease, at);
  } else {
    enforce_running_budget();
  }
  checkpoints_.classify_refusal(lease.session, lineage, query, lease.chain, got.reused);
  lease.computed = got.reused;
  return got;
}

Acquisition PrefixCache::Impl::resume_at_checkpoint(Lease& lease, const StateOffers& at) {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  const auto query = std::span<const Token>(lease.prompt).first(static_cast<size_t>(n - 1));
  const Lineage& lineage = lease.lineage;
  const bool attention = engine::has_attention_cells(engine_.model());
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
  enforce_running_budget();
  // The demotions may have moved segments and checkpoints around (a budget can evict what was
  // planned): the plan is made again from what the tiers hold now.
  std::int32_t reach = from_device;
  HostTier::Plan host_plan;
  if (attention) {
    host_plan = host_.plan(lineage, query, from_device);
    reach = std::max(from_device, host_plan.length);
  }
  const CheckpointStore::Found now = checkpoints_.find(lineage, query, lease.chain, attention ? reach : n - 1);
  const std::int32_t k = now.position;
  bool ok = k >= config_.min_prefix;
  if (ok && k < from_device) {
    // Resume earlier than the cells adopted: without its partial state the sequence can be cut.
    engine_.drop_checkpoint_state(lease.seq);
    engine_.remove_sequence(lease.seq, k, -1);
    lock(lease, k);
  }
  if (ok && attention && from_device < k) {
    ok = host_.restore(host_.clip(host_plan, k), lease.seq, from_device, stats_.failed_restores, pin_) >= k;
  }
  // The attention cells are in place; the checkpoint replaces the partial state they came with.
  ok = ok && engine_.restore_checkpoint(now.checkpoint->state, lease.seq);
  if (!ok) {
    if (k >= config_.min_prefix) {
      stats_.failed_restores += 1;
      spdlog::warn("cache: the checkpoint at position {} could not be restored; the request runs cold", k);
      checkpoints_.erase(now.key);
    }
    unlock(lease);
    engine_.remove_sequence(lease.seq, 0, -1);
    return {};
  }
  lease.window_from = std::min(now.checkpoint->window_from, k);
  checkpoints_.used(now.key, lease.session);
  const Tier tier = credited_tier(k, Provenance{.device = from_device,
                                                .host = at.host_only,
                                                .state_restored = true,
                                                .state_from_disk = at.promoted && k > at.in_memory,
                                                .remote_from = lease.remote_from});
  return Acquisition{from_device >= k ? Outcome::partial : Outcome::hit_restore, k, tier, false};
}

}  // namespace prefixd::cache
