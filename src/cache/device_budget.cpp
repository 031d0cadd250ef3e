#include "cache/device_budget.h"

namespace prefixd::cache {

DeviceBudget::DeviceBudget(const Tiers& tiers, CacheCounters& counters, std::function<void(const std::string&)> repin)
    : tiers_(tiers), counters_(counters), repin_(std::move(repin)) {}

void DeviceBudget::enforce_running() {
  while (tiers_.device.cells() - tiers_.device.locked_cells() > *tiers_.config.device_cells) {
    DeviceEntry* victim = tiers_.device.least_recently_used([](const DeviceEntry&) { return true; });
    if (victim == nullptr) break;
    demote(*victim);
  }
}

void DeviceBudget::enforce_idle() {
  while (tiers_.device.budgeted_idle_cells() > *tiers_.config.device_cells) {
    DeviceEntry* victim = tiers_.device.least_recently_used([&](const DeviceEntry& e) { return e.id != tiers_.device.newest(); });
    if (victim == nullptr) break;
    demote(*victim);
  }
}

std::int64_t DeviceBudget::release(std::int64_t cells) {
  const std::int64_t before = tiers_.device.cells();
  while (before - tiers_.device.cells() < cells) {
    DeviceEntry* victim = tiers_.device.least_recently_used([](const DeviceEntry&) { return true; });
    if (victim == nullptr) break;
    demote(*victim);
  }
  return before - tiers_.device.cells();
}

bool DeviceBudget::free_a_holder(const std::string& ns) {
  DeviceEntry* victim = tiers_.device.least_recently_used_droppable();
  if (victim == nullptr) return false;
  const std::string victim_ns = victim->lineage.ns;
  save_to_host(*victim);
  checkpoint_entry_end(*victim);
  tiers_.device.drop(*victim);
  if (victim_ns != ns) repin_(victim_ns);
  return true;
}

bool DeviceBudget::expire(DeviceClock::time_point cutoff) {
  bool changed = false;
  while (DeviceEntry* victim = tiers_.device.least_recently_used([&](const DeviceEntry& e) { return e.last_used < cutoff && !tiers_.device.retained(e); })) {
    const std::string ns = victim->lineage.ns;
    tiers_.device.cut_back(*victim);
    counters_.totals.device.evictions_ttl += 1;
    repin_(ns);
    changed = true;
  }
  return changed;
}

void DeviceBudget::demote(DeviceEntry& e) {
  const std::string ns = e.lineage.ns;
  save_to_host(e);
  checkpoint_entry_end(e);
  tiers_.device.cut_back(e);
  repin_(ns);
}

void DeviceBudget::save_to_host(const DeviceEntry& e) {
  // What stays on the device (locked, or held by another entry) is not copied: the host tier gets
  // it when the device gives it up, and a restore takes those positions from the device.
  const std::int32_t keep = tiers_.device.tree(e.lineage.ns)->keep_length(e.id);
  HostStore::Evicted evicted;
  bool saved = false;
  if (tiers_.family.keeps_cells()) {
    saved = tiers_.host.save(e.lineage, e.tokens, keep, e.holder, evicted, e.scope, e.prompt_length);
  } else {
    saved = e.state_at_end;  // the state alone is the entry: kept as a checkpoint at its end
  }
  if (saved) {
    counters_.totals.device.demotions += 1;
  } else {
    counters_.totals.device.evictions += 1;
  }
  counters_.count_evictions(evicted);
}

void DeviceBudget::checkpoint_entry_end(const DeviceEntry& e) {
  if (!e.state_at_end || tiers_.trimmable()) return;
  const std::vector<Digest> chain = tiers_.hasher.chain(e.lineage, e.tokens);
  tiers_.backing.keep_checkpoint(e.lineage, e.tokens, chain, tiers_.engine.save_checkpoint(e.holder), e.session,
                           CheckpointKind::sequence_end, e.window_from, e.scope);
}

}  // namespace prefixd::cache
