// prefixd cache — acquire: a request registered as a lease, the shared tier's fetched values
// adopted, the reuse planner asked (ReusePlanner, reuse_planner.h), chunks past its exact prefix
// shifted in when the request asks (prefix_cache_shift.cpp), and the outcome counted;
// poll() (PrefixCache::take_resolved) asks again for the requests that waited for a running
// request's prefix.
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

Acquisition PrefixCache::Impl::acquire(const RequestKey& key, std::span<const Token> prompt, SeqId seq,
                                       RemoteFetch* fetched) {
  if (!config_.enabled) return bypass(key.scope);
  summary_.label_namespace(key.namespace_digest, key.adapter);  // what it leaves is labelled so
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
  std::optional<ShiftDonor> donor = reserve_shift_donor(lease);
  const Acquisition got = shift_into(lease, planner_.acquire(lease), std::move(donor));
  if (!got.waiting) record(got, key.scope, static_cast<std::int64_t>(prompt.size()));
  trace("acquire seq={} ns={} session='{}' prompt={} -> {} reused={} tier={}{}", seq, short_hex(key.namespace_digest),
        key.session, prompt.size(), outcome_name(got.outcome), got.reused, tier_name(got.tier),
        got.waiting ? " (waiting)" : "");
  publish();
  return got;
}

Acquisition PrefixCache::Impl::bypass(const ScopeId& scope) {
  Acquisition got{Outcome::bypass};
  record(got, scope, 0);
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
    std::optional<ShiftDonor> donor = reserve_shift_donor(*lease);
    const Acquisition got = shift_into(*lease, planner_.acquire(*lease), std::move(donor));
    if (got.waiting) continue;
    record(got, lease->key.scope, static_cast<std::int64_t>(lease->prompt.size()));
    trace("resolved seq={} -> {} reused={}", lease->seq, outcome_name(got.outcome), got.reused);
    out.push_back(Resolved{lease->seq, got});
  }
  if (!out.empty()) publish();
  return out;
}

}  // namespace prefixd::cache
