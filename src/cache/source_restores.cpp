// prefixd cache — the sources whose offers are restores: host-tier segments (with the disk's files
// behind them) and saved states (sources.h). Their offers read the disk's index only; the files a
// chosen offer counts on are read and promoted when it is adopted.
#include "cache/sources.h"

#include <spdlog/spdlog.h>

#include "cache/kept_state.h"

namespace prefixd::cache {

namespace {

std::span<const engine::Token> guarded(const Lease& lease) {
  return std::span<const engine::Token>(lease.prompt).first(lease.prompt.size() - 1);  // the one-token guard
}

}  // namespace

HostSegments::HostSegments(const CacheConfig& config, engine::Engine& engine, const DeviceEntries& entries,
                           DeviceTier& device, HostTier& host, BackingTiers& backing, CacheCounters& counters,
                           CellCopies& copies, engine::SeqId pin)
    : config_(config), engine_(engine), entries_(entries), device_(device), host_(host), backing_(backing),
      counters_(counters), copies_(copies), pin_(pin) {}

HostTier::Plan HostSegments::outside_spans(const Lease& lease, HostTier::Plan plan, std::int32_t on_device) const {
  const std::int32_t cut = outside_unbroken(lease.key.unbroken, plan.length);
  if (cut >= plan.length) return plan;
  return cut > on_device ? host_.clip(plan, cut) : HostTier::Plan{};
}

SourceOffer HostSegments::offer(const ReuseQuery& query) const {
  const Lease& lease = query.lease;
  SourceOffer out;
  out.source = Source::host;
  // The device's part of the prefix is copied from its cells; the host tier's segments go on from
  // the last grid line at or before it.
  out.entry = entries_.offer(query).entry;
  const std::int32_t on_device = out.entry.length;
  BackingTiers::RestorePlan plan = backing_.plan_restore(lease.lineage, query.tokens, on_device, query.with_disk);
  out.host = std::move(plan.host);
  out.disk = std::move(plan.disk);
  out.host_only = out.host.length;
  const std::int32_t reach = std::max(out.host.length, out.disk.reach);
  const std::int32_t cut = outside_unbroken(lease.key.unbroken, reach);
  out.reach = cut >= reach ? reach : cut > on_device ? cut : 0;
  out.host_only = std::min(out.host_only, out.reach);
  out.copied = std::min(on_device, out.reach);
  out.restored = out.reach - out.copied;
  out.from_disk = std::max(0, out.reach - std::max(out.host_only, on_device));
  return out;
}

std::optional<Acquisition> HostSegments::adopt(Lease& lease, const SourceOffer& offer) {
  const auto query = guarded(lease);
  const std::int32_t from = offer.entry.length;
  HostTier::Plan plan = offer.host;
  if (!offer.disk.files.empty()) {
    HostStore::Evicted evicted;
    plan = backing_.promote(lease.lineage, query, from, offer.host, offer.disk, evicted);
    counters_.count_evictions(evicted);
  }
  plan = outside_spans(lease, plan, from);
  if (plan.length < offer.reach) return std::nullopt;  // a file did not read back whole
  // A restore also takes the device's part of the prefix from its cells.
  if (from > 0) copies_.from_entry(lease, offer.entry.entry, from);
  copies_.make_room();
  std::int32_t held = host_.restore(plan, lease.seq, from, counters_.totals.host.failed_restores, pin_);
  // A segment that failed may leave the prefix inside an unbroken span: cut it back to its start
  // (never below `from`, which is outside every span).
  if (const std::int32_t cut = outside_unbroken(lease.key.unbroken, held); cut < held) {
    engine_.remove_sequence(lease.seq, cut, -1);
    held = cut;
  }
  if (held < config_.min_prefix || held <= from) {
    unlock(device_, lease);
    engine_.remove_sequence(lease.seq, 0, -1);
    return Acquisition{};
  }
  const Tier tier = credited_tier(held, Provenance{.device = from, .host = offer.host_only, .remote_from = lease.remote_from});
  // Under session isolation a restore past the shared prefix can only be the session's own.
  return Acquisition{Outcome::hit_restore, held, tier, lease.reach.own && held > lease.reach.others};
}

Checkpoints::Checkpoints(const CacheConfig& config, const Family& family, engine::Engine& engine,
                         DeviceTier& device, HostTier& host, CheckpointStore& checkpoints, BackingTiers& backing,
                         CacheCounters& counters, const RunningRequests& running, CellCopies& copies,
                         engine::SeqId pin)
    : config_(config), family_(family), engine_(engine), device_(device), host_(host), checkpoints_(checkpoints),
      backing_(backing), counters_(counters), running_(running), copies_(copies), pin_(pin) {}

SourceOffer Checkpoints::offer(const ReuseQuery& query) const {
  const Lease& lease = query.lease;
  const Lineage& lineage = lease.lineage;
  SourceOffer out;
  out.source = Source::checkpoint;
  // The attention cells before a state come from the longest entry sharing cells with the prompt,
  // another running request (its cells before what it computed are final), or the host tier.
  out.entry = device_.match(lineage.ns, query.tokens, lease.session, lease.reach);
  auto limit = static_cast<std::int32_t>(query.tokens.size());
  if (family_.keeps_cells()) {
    const SourceOffer running = running_.offer(query);
    out.running = running.running;
    out.running_common = running.running_common;
    out.running_computed = running.reach;
    BackingTiers::RestorePlan plan = backing_.plan_restore(lineage, query.tokens, out.entry.length, query.with_disk);
    out.host = std::move(plan.host);
    out.disk = std::move(plan.disk);
    out.host_only = out.host.length;
    limit = std::max({out.entry.length, out.running_computed, out.host.length, out.disk.reach});
  }
  const KeptState kept = find_kept_state(device_, checkpoints_, backing_, lineage, lease.session, lease.reach,
                                         query.tokens, lease.chain, limit, query.with_disk);
  out.checkpoint = kept.memory;
  out.in_memory = kept.in_memory();
  out.disk_checkpoint = kept.disk;
  out.reach = std::max(out.checkpoint.position, out.disk_checkpoint);
  out.state = true;
  out.copied = family_.keeps_cells() ? std::min({out.reach, std::max(out.entry.length, out.running_computed)}) : 0;
  out.restored = family_.keeps_cells() ? out.reach - out.copied : 0;
  out.from_disk = out.disk_checkpoint > out.checkpoint.position
                      ? out.reach
                      : std::max(0, std::min(out.reach, out.disk.reach) - std::max(out.host.length, out.copied));
  return out;
}

std::optional<Acquisition> Checkpoints::adopt(Lease& lease, const SourceOffer& offer) {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  const auto query = guarded(lease);
  const Lineage& lineage = lease.lineage;
  const bool attention = family_.keeps_cells();
  // What the offer counted on from disk goes into the host tier and the checkpoint store first.
  if (!offer.disk.files.empty()) {
    HostStore::Evicted evicted;
    backing_.promote(lineage, query, offer.entry.length, offer.host, offer.disk, evicted);
    counters_.count_evictions(evicted);
  }
  const bool from_disk = offer.disk_checkpoint > offer.checkpoint.position;
  if (from_disk && !backing_.promote_checkpoint_at(lineage, query, lease.chain, offer.disk_checkpoint, lease.session,
                                                   lease.key.scope)) {
    return std::nullopt;
  }
  const std::int32_t wanted = offer.reach;
  // The attention cells before the state: another request's (sharing them is free, a host restore
  // is a copy) when the device tier falls short of it, else the device tier's.
  std::int32_t from_device = attention ? std::min(offer.entry.length, wanted) : 0;
  if (attention && from_device < wanted && offer.running_computed >= wanted) {
    from_device = wanted;
    copies_.from_running(lease, *offer.running, from_device);
  } else if (from_device > 0) {
    copies_.from_entry(lease, offer.entry.entry, from_device);
  }
  copies_.make_room();
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
    lock(device_, lease, k);
  }
  if (ok && attention && from_device < k) {
    ok = host_.restore(host_.clip(host_plan, k), lease.seq, from_device, counters_.totals.host.failed_restores, pin_) >= k;
  }
  // The attention cells are in place; the checkpoint replaces the partial state they came with.
  ok = ok && engine_.restore_checkpoint(now.checkpoint->state, lease.seq);
  if (!ok) {
    if (k >= config_.min_prefix) {
      counters_.totals.host.failed_restores += 1;
      spdlog::warn("cache: the checkpoint at position {} could not be restored; the request runs cold", k);
      checkpoints_.erase(now.key);
    }
    unlock(device_, lease);
    engine_.remove_sequence(lease.seq, 0, -1);
    return Acquisition{};
  }
  lease.window_from = std::min(now.checkpoint->window_from, k);
  checkpoints_.used(now.key, lease.session);
  const Tier tier = credited_tier(k, Provenance{.device = from_device,
                                                .host = offer.host_only,
                                                .state_restored = true,
                                                .state_from_disk = from_disk && k > offer.in_memory,
                                                .remote_from = lease.remote_from});
  return Acquisition{from_device >= k ? Outcome::partial : Outcome::hit_restore, k, tier, false};
}

}  // namespace prefixd::cache
