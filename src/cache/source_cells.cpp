// prefixd cache — the sources whose offers are cells already in the context: device entries,
// running requests, entries' end states and window runs (sources.h), and the copies they share.
#include "cache/sources.h"

namespace prefixd::cache {

namespace {

bool reaches_whole(std::int32_t reach, std::size_t source_tokens, const Lease& lease) {
  return reach == static_cast<std::int32_t>(source_tokens) || reach == static_cast<std::int32_t>(lease.prompt.size()) - 1;
}

}  // namespace

void CellCopies::from_entry(Lease& lease, EntryId id, std::int32_t length) {
  device_.copy_into(id, lease.seq, length);
  lock(device_, lease, length);
}

void CellCopies::from_running(Lease& lease, const Lease& other, std::int32_t length) {
  engine_.copy_sequence(other.seq, lease.seq, 0, length);
  lock(device_, lease, std::min(length, other.locked));
  counters_.count_inflight_share(lease.key.scope);
}

Acquisition CellCopies::state_of_entry(Lease& lease, const RadixTree::Match& entry, std::int32_t length,
                                       Outcome outcome) {
  from_entry(lease, entry.entry, length);
  lease.window_from = device_.entry(entry.entry).window_from;
  const Acquisition got{outcome, length, Tier::device, entry.in_session};
  make_room();
  return got;
}

DeviceEntries::DeviceEntries(const CacheConfig& config, const DeviceTier& device, CellCopies& copies)
    : config_(config), device_(device), copies_(copies) {}

SourceOffer DeviceEntries::offer(const ReuseQuery& query) const {
  const Lease& lease = query.lease;
  SourceOffer out;
  out.source = Source::device;
  out.entry = config_.apc_enabled ? device_.match(lease.lineage.ns, query.tokens, lease.session, lease.reach)
                                  : device_.match_whole(lease.lineage.ns, query.tokens, lease.session, lease.reach);
  out.entry.length = outside_unbroken(lease.key.unbroken, out.entry.length);
  out.reach = out.copied = out.entry.length;
  return out;
}

std::optional<Acquisition> DeviceEntries::adopt(Lease& lease, const SourceOffer& offer) {
  copies_.from_entry(lease, offer.entry.entry, offer.reach);
  const bool whole = reaches_whole(offer.reach, device_.entry(offer.entry.entry).tokens.size(), lease);
  const Acquisition got{whole ? Outcome::hit_extend : Outcome::partial, offer.reach, Tier::device, offer.entry.in_session};
  copies_.make_room();
  return got;
}

RunningRequests::RunningRequests(const Family& family, const DeviceTier& device,
                                 const std::map<engine::SeqId, Lease>& leases, CellCopies& copies)
    : family_(family), device_(device), leases_(leases), copies_(copies) {}

SourceOffer RunningRequests::offer(const ReuseQuery& query) const {
  const Lease& lease = query.lease;
  const bool may_wait = family_.waits_for_running();
  SourceOffer best;
  best.source = Source::running;
  for (const auto& [seq, other] : leases_) {
    if (seq == lease.seq || other.lineage.ns != lease.lineage.ns || !device_.holds_its_start(seq)) continue;
    // A wait is only ever for an older request, so waits never form a cycle; a request that waits
    // itself has computed nothing to share now.
    if (may_wait ? other.order >= lease.order : other.waits_for.has_value()) continue;
    const std::int32_t common =
        outside_unbroken(lease.key.unbroken, shared_with(lease, other, common_prefix(query.tokens, other.prompt)));
    const std::int32_t now = outside_unbroken(lease.key.unbroken, std::min(common, other.computed));
    const bool better =
        may_wait ? common > best.running_common || (common == best.running_common && now > best.reach) : now > best.reach;
    if (!better) continue;
    best.running = &other;
    best.running_common = common;
    best.reach = best.copied = best.running_computed = now;
  }
  return best;
}

std::optional<Acquisition> RunningRequests::adopt(Lease& lease, const SourceOffer& offer) {
  const Lease& other = *offer.running;
  copies_.from_running(lease, other, offer.reach);
  const bool whole = reaches_whole(offer.reach, other.prompt.size(), lease);
  const Acquisition got{whole ? Outcome::hit_extend : Outcome::partial, offer.reach, Tier::device,
                        lease.reach.own && other.session == lease.session};
  copies_.make_room();
  return got;
}

EntryStates::EntryStates(const DeviceTier& device, CellCopies& copies) : device_(device), copies_(copies) {}

SourceOffer EntryStates::offer(const ReuseQuery& query) const {
  const Lease& lease = query.lease;
  SourceOffer out;
  out.source = Source::entry_state;
  out.entry = device_.match_whole(lease.lineage.ns, query.tokens, lease.session, lease.reach);
  if (out.entry.length > 0 && !device_.entry(out.entry.entry).state_at_end) out.entry = {};
  out.reach = out.copied = out.entry.length;
  return out;
}

std::optional<Acquisition> EntryStates::adopt(Lease& lease, const SourceOffer& offer) {
  return copies_.state_of_entry(lease, offer.entry, offer.reach, Outcome::hit_extend);
}

WindowRuns::WindowRuns(const Family& family, const DeviceTier& device, CellCopies& copies)
    : family_(family), device_(device), copies_(copies) {}

SourceOffer WindowRuns::offer(const ReuseQuery& query) const {
  const Lease& lease = query.lease;
  SourceOffer out;
  out.source = Source::window;
  if (!family_.keeps_only_window()) return out;
  const RadixTree::Match match = device_.match(lease.lineage.ns, query.tokens, lease.session, lease.reach);
  if (match.length == 0 || outside_unbroken(lease.key.unbroken, match.length) != match.length) return out;
  // The window is known unbroken from the entry's window_from up; it must cover the window the
  // next position attends to.
  const DeviceEntry& entry = device_.entry(match.entry);
  if (!family_.window_intact(device_.window_run(entry.holder, entry.window_from), match.length)) return out;
  out.entry = match;
  out.reach = out.copied = match.length;
  return out;
}

std::optional<Acquisition> WindowRuns::adopt(Lease& lease, const SourceOffer& offer) {
  return copies_.state_of_entry(lease, offer.entry, offer.reach, Outcome::partial);
}

}  // namespace prefixd::cache
