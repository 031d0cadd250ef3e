#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

bool PrefixCache::Impl::make_room(std::int64_t running, std::int64_t need) {
  // A running sequence's cells that are the tree's (locked) are counted in device_cells() already.
  std::int64_t shared = 0;
  for (const auto& [seq, lease] : leases_) shared += lease.locked;
  const auto in_use = [&] { return device_.cells() + running - shared + need; };
  if (const std::int64_t over = in_use() - engine_.context_size(); over > 0) release_device_cells(over);
  return in_use() <= engine_.context_size();
}

std::int64_t PrefixCache::Impl::release_device_cells(std::int64_t cells) {
  refresh_window_entries();
  const std::int64_t before = device_cells();
  while (before - device_cells() < cells) {
    DeviceEntry* victim = device_.least_recently_used([](const DeviceEntry&) { return true; });
    if (victim == nullptr) break;
    demote(*victim);
  }
  publish();
  return before - device_cells();
}

void PrefixCache::Impl::expire() {
  const auto cutoff = Clock::now() - config_.ttl;
  bool changed = false;
  while (DeviceEntry* victim = device_.least_recently_used([&](const DeviceEntry& e) { return e.last_used < cutoff; })) {
    const std::string ns = victim->lineage.ns;
    device_.cut_back(*victim);
    stats_.evictions_ttl += 1;
    repin(ns);
    changed = true;
  }
  HostStore::Evicted evicted;
  host_.store().expire(cutoff, evicted);
  const std::size_t checkpoints = checkpoints_.size();
  checkpoints_.expire(cutoff);
  changed |= checkpoints_.size() != checkpoints;
  add_evictions(evicted);
  if (changed || evicted.total() > 0) publish();
}

bool PrefixCache::Impl::compaction_due() const {
  return config_.compaction == Compaction::idle && device_.donated_since_compaction() && leases_.empty() && can_reuse() &&
         trimmable();
}

std::int64_t PrefixCache::Impl::compact() {
  if (!compaction_due()) return 0;
  const DeviceTier::Compacted done = device_.compact();
  if (done.lost > 0) spdlog::warn("cache: compaction lost {} entries", done.lost);
  stats_.compactions += 1;
  trace("compact: {} entries, {} cells rewritten", device_.entries().size(), done.cells);
  publish();
  return done.cells;
}

ResetReport PrefixCache::Impl::reset() {
  ResetReport report;
  report.entries = static_cast<std::int64_t>(device_.entries().size() + host_.store().size() + checkpoints_.size());
  report.bytes = device_.bytes() + host_.store().bytes() + checkpoints_.bytes();
  checkpoints_.clear();
  device_.clear();
  for (auto& [seq, lease] : leases_) lease.locked = 0;  // their cells are their own now
  host_.store().clear();
  session_prompts_.clear();
  if (backing_.disk() != nullptr) {
    const DiskStats disk = backing_.disk()->stats();
    report.entries += disk.files;
    report.bytes += backing_.disk()->clear();
  }
  publish();
  return report;
}

// While a request runs the newest entry has no exemption: idle cells above the budget would make
// every token it computes attend over them (on the CPU, budget 0: llama-server's single slot
// likewise keeps its previous prompt only when the next one extends it).
void PrefixCache::Impl::enforce_running_budget() {
  while (idle_cells() > *config_.device_cells) {
    DeviceEntry* victim = device_.least_recently_used([](const DeviceEntry&) { return true; });
    if (victim == nullptr) break;
    demote(*victim);
  }
}

// Keeps idle cells within the budget, not counting the newest entry's own cells.
void PrefixCache::Impl::enforce_device_budget() {
  while (budgeted_idle_cells() > *config_.device_cells) {
    DeviceEntry* victim = device_.least_recently_used([&](const DeviceEntry& e) { return e.id != device_.newest(); });
    if (victim == nullptr) break;
    demote(*victim);
  }
}

// Frees a holder for a new entry of `ns` by demoting the least recently used entry that can be
// dropped whole (nothing it holds is locked, or another entry holds it too).
bool PrefixCache::Impl::free_a_holder(const std::string& ns) {
  DeviceEntry* victim = device_.least_recently_used_droppable();
  if (victim == nullptr) return false;
  const std::string victim_ns = victim->lineage.ns;
  save_to_host(*victim);
  checkpoint_entry_end(*victim);
  device_.drop(*victim);
  if (victim_ns != ns) repin(victim_ns);
  return true;
}

// Moves an entry's K/V to the host tier, then gives up its cells that nobody else uses.
void PrefixCache::Impl::demote(DeviceEntry& e) {
  const std::string ns = e.lineage.ns;
  save_to_host(e);
  checkpoint_entry_end(e);
  device_.cut_back(e);
  repin(ns);
}

void PrefixCache::Impl::save_to_host(const DeviceEntry& e) {
  // What stays on the device (locked, or held by another entry) is not copied: the host tier gets
  // it when the device gives it up, and a restore takes those positions from the device.
  const std::int32_t keep = device_.tree(e.lineage.ns)->keep_length(e.id);
  HostStore::Evicted evicted;
  bool saved = false;
  if (engine::has_attention_cells(engine_.model())) {
    saved = host_.save(e.lineage, e.tokens, keep, e.holder, evicted, e.scope);
  } else {
    saved = e.state_at_end;  // the state alone is the entry: kept as a checkpoint at its end
  }
  if (saved) {
    stats_.demotions += 1;
  } else {
    stats_.device_evictions += 1;
  }
  add_evictions(evicted);
}

void PrefixCache::Impl::add_evictions(const HostStore::Evicted& evicted) {
  stats_.evictions_lru += evicted.lru;
  stats_.evictions_ttl += evicted.ttl;
  stats_.evictions_capacity += evicted.capacity;
}

}  // namespace prefixd::cache
