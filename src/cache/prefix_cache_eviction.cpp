// prefixd cache — the cache's budgets and lifetimes at its interface: making room for a prompt,
// releasing cells, the idle tick (expiry, compaction), reset (the device tier's policy itself is
// DeviceBudget).
#include "cache/prefix_cache_impl.h"

#include <algorithm>

namespace prefixd::cache {

std::int64_t PrefixCache::Impl::leased_cells() const {
  std::int64_t shared = 0;
  for (const auto& [seq, lease] : leases_) shared += lease.locked;
  return shared;
}

// Less the one cell make_room_for_step keeps for a lone row's padding: a draft that took it would
// leave a padded call of another request without a cell.
std::int64_t PrefixCache::Impl::spare_cells(std::int64_t running) const {
  return std::max<std::int64_t>(0, engine_.context_size() - (device_.cells() + running - leased_cells() + 1));
}

bool PrefixCache::Impl::make_room(std::int64_t running, std::int64_t need) {
  // A memory without attention cells (recurrent) keeps one state per sequence id: running
  // positions take no room that dropping an entry could give.
  if (!family_.keeps_cells()) return true;
  // A running sequence's cells that are the tree's (locked) are counted in device_cells() already.
  const std::int64_t shared = leased_cells();
  const auto in_use = [&] { return device_.cells() + running - shared + need; };
  if (const std::int64_t over = in_use() - engine_.context_size(); over > 0) release_device_cells(over);
  return in_use() <= engine_.context_size();
}

std::int64_t PrefixCache::Impl::release_device_cells(std::int64_t cells) {
  refresh_window_entries();
  const std::int64_t freed = budget_.release(cells);
  publish();
  return freed;
}

void PrefixCache::Impl::expire() {
  const auto cutoff = Clock::now() - config_.ttl;
  // Retentions past their deadline first: what they kept is then judged by its last use alone.
  bool changed = retentions_.expire(Clock::now()) > 0;
  changed |= budget_.expire(cutoff);
  HostStore::Evicted evicted;
  host_.store().expire(cutoff, evicted);
  const std::size_t checkpoints = checkpoints_.size();
  checkpoints_.expire(cutoff);
  changed |= checkpoints_.size() != checkpoints;
  add_evictions(evicted);
  if (changed || evicted.total() > 0) publish();
}

std::int64_t PrefixCache::Impl::tick(Clock::time_point now, bool nothing_running) {
  if (now >= next_expiry_) {
    expire();
    next_expiry_ = Clock::now() + std::chrono::seconds(1);
  }
  // Requests that bypass the cache hold cells it does not know of: only the caller knows that
  // nothing runs at all.
  return nothing_running ? compact() : 0;
}

bool PrefixCache::Impl::compaction_due() const {
  return config_.compaction == Compaction::idle && device_.donated_since_compaction() && leases_.empty() && can_reuse() &&
         trimmable();
}

std::int64_t PrefixCache::Impl::compact() {
  if (!compaction_due()) return 0;
  const DeviceTier::Compacted done = device_.compact();
  if (done.lost > 0) spdlog::warn("cache: compaction lost {} entries", done.lost);
  counters_.totals.device.compactions += 1;
  trace("compact: {} entries, {} cells rewritten", device_.entries().size(), done.cells);
  publish();
  return done.cells;
}

ResetReport PrefixCache::Impl::reset() {
  ResetReport report;
  report.entries = static_cast<std::int64_t>(device_.entries().size() + host_.store().size() + checkpoints_.size());
  report.bytes = device_.bytes() + host_.store().bytes() + checkpoints_.bytes();
  retentions_.clear();
  checkpoints_.clear();
  device_.clear();
  for (auto& [seq, lease] : leases_) lease.locked = 0;  // their cells are their own now
  host_.store().clear();
  if (backing_.disk() != nullptr) {
    const DiskStats disk = backing_.disk()->stats();
    report.entries += disk.files;
    report.bytes += backing_.disk()->clear();
  }
  summary_.cleared();
  publish();
  return report;
}

}  // namespace prefixd::cache
