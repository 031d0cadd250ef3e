#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

std::int64_t PrefixCache::Impl::device_cells() const {
  if (!engine::has_attention_cells(engine_.model())) return 0;  // holders keep states, not cells
  std::int64_t total = 0;
  for (const auto& [ns, tree] : trees_) total += tree.unique_tokens();
  return total;
}

std::int64_t PrefixCache::Impl::locked_cells() const {
  if (!engine::has_attention_cells(engine_.model())) return 0;
  std::int64_t total = 0;
  for (const auto& [ns, tree] : trees_) total += tree.locked_tokens();
  return total;
}

bool PrefixCache::Impl::make_room(std::int64_t running, std::int64_t need) {
  // A running sequence's cells that are the tree's (locked) are counted in device_cells() already.
  std::int64_t shared = 0;
  for (const auto& [seq, lease] : leases_) shared += lease.locked;
  const auto in_use = [&] { return device_cells() + running - shared + need; };
  if (const std::int64_t over = in_use() - engine_.context_size(); over > 0) release_device_cells(over);
  return in_use() <= engine_.context_size();
}

std::int64_t PrefixCache::Impl::budgeted_idle_cells() const {
  std::int64_t own = 0;
  if (auto it = entries_.find(newest_); it != entries_.end()) {
    const DeviceEntry& e = it->second;
    own = static_cast<std::int64_t>(e.tokens.size()) - trees_.at(e.lineage.ns).locked_length(e.id);
  }
  return idle_cells() - own;
}

std::int64_t PrefixCache::Impl::release_device_cells(std::int64_t cells) {
  refresh_window_entries();
  const std::int64_t before = device_cells();
  while (before - device_cells() < cells) {
    DeviceEntry* victim = least_recently_used([](const DeviceEntry&) { return true; });
    if (victim == nullptr) break;
    demote(*victim);
  }
  publish();
  return before - device_cells();
}

void PrefixCache::Impl::expire() {
  const auto cutoff = Clock::now() - config_.ttl;
  bool changed = false;
  while (DeviceEntry* victim = least_recently_used([&](const DeviceEntry& e) { return e.last_used < cutoff; })) {
    const std::string ns = victim->lineage.ns;
    cut_back(*victim);
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
  return config_.compaction == Compaction::idle && donated_since_compaction_ && leases_.empty() && can_reuse() &&
         trimmable();
}

std::int64_t PrefixCache::Impl::compact() {
  if (!compaction_due()) return 0;
  donated_since_compaction_ = false;
  // Entries oldest first, so an entry's base (the earlier entry of the same namespace sharing
  // the longest prefix: the sharing the cells had) is rewritten before it.
  struct Item {
    DeviceEntry* entry;
    const Item* base = nullptr;
    std::int32_t shared = 0;
    engine::Bytes tail;
  };
  std::vector<Item> items;
  for (auto& [id, e] : entries_) items.push_back(Item{&e});
  std::ranges::sort(items, [](const Item& a, const Item& b) { return a.entry->id < b.entry->id; });
  std::int64_t cells = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    Item& item = items[i];
    for (size_t j = 0; j < i; ++j) {
      if (items[j].entry->lineage.ns != item.entry->lineage.ns) continue;
      const std::int32_t common = common_prefix(items[j].entry->tokens, item.entry->tokens);
      if (common > item.shared) {
        item.shared = common;
        item.base = &items[j];
      }
    }
    const auto n = static_cast<std::int32_t>(item.entry->tokens.size());
    if (item.shared < n) {
      engine_.copy_sequence(item.entry->holder, scratch_, item.shared, n);
      item.tail = engine_.save_sequence(scratch_);
      engine_.remove_sequence(scratch_, 0, -1);
      if (item.tail.empty()) return 0;  // nothing has been changed yet
    }
    cells += n - item.shared;
  }
  engine_.clear();
  std::vector<EntryId> lost;
  std::vector<bool> ok(items.size(), true);
  for (size_t i = 0; i < items.size(); ++i) {
    Item& item = items[i];
    const auto n = static_cast<std::int32_t>(item.entry->tokens.size());
    const size_t base = item.base == nullptr ? i : static_cast<size_t>(item.base - items.data());
    ok[i] = base == i || ok[base];
    if (ok[i] && item.base != nullptr) engine_.copy_sequence(item.base->entry->holder, item.entry->holder, 0, item.shared);
    if (ok[i] && item.shared < n) {
      // The cells were all in use a moment ago, so they fit again; this is a safety net.
      ok[i] = engine_.restore_sequence(item.tail, scratch_);
      if (ok[i]) engine_.copy_sequence(scratch_, item.entry->holder, item.shared, n);
      engine_.remove_sequence(scratch_, 0, -1);
    }
    if (!ok[i]) lost.push_back(item.entry->id);
  }
  for (EntryId id : lost) drop(entries_.at(id));
  if (!lost.empty()) spdlog::warn("cache: compaction lost {} entries", lost.size());
  stats_.compactions += 1;
  trace("compact: {} entries, {} cells rewritten", items.size(), cells);
  publish();
  return cells;
}

ResetReport PrefixCache::Impl::reset() {
  ResetReport report;
  report.entries = static_cast<std::int64_t>(entries_.size() + host_.store().size() + checkpoints_.size());
  report.bytes = device_bytes() + host_.store().bytes() + checkpoints_.bytes();
  checkpoints_.clear();
  for (auto& [id, e] : entries_) {
    engine_.remove_sequence(e.holder, 0, -1);
    free_holders_.push_back(e.holder);
  }
  entries_.clear();
  trees_.clear();
  for (auto& [seq, lease] : leases_) lease.locked = 0;  // their cells are their own now
  host_.store().clear();
  session_prompts_.clear();
  if (disk_) {
    const DiskStats disk = disk_->stats();
    report.entries += disk.files;
    report.bytes += disk_->clear();
  }
  publish();
  return report;
}

std::uint64_t PrefixCache::Impl::device_bytes() const {
  return static_cast<std::uint64_t>(device_cells()) * engine_.model().kv_bytes_per_token;
}

// While a request runs the newest entry has no exemption: idle cells above the budget would make
// every token it computes attend over them (on the CPU, budget 0: llama-server's single slot
// likewise keeps its previous prompt only when the next one extends it).
void PrefixCache::Impl::enforce_running_budget() {
  while (idle_cells() > *config_.device_cells) {
    DeviceEntry* victim = least_recently_used([](const DeviceEntry&) { return true; });
    if (victim == nullptr) break;
    demote(*victim);
  }
}

// Keeps idle cells within the budget, not counting the newest entry's own cells.
void PrefixCache::Impl::enforce_device_budget() {
  while (budgeted_idle_cells() > *config_.device_cells) {
    DeviceEntry* victim = least_recently_used([this](const DeviceEntry& e) { return e.id != newest_; });
    if (victim == nullptr) break;
    demote(*victim);
  }
}

// Frees a holder for a new entry of `ns` by demoting the least recently used entry that can be
// dropped whole (nothing it holds is locked, or another entry holds it too).
bool PrefixCache::Impl::free_a_holder(const std::string& ns) {
  DeviceEntry* victim = nullptr;
  for (auto& [id, e] : entries_) {
    const RadixTree& tree = trees_.at(e.lineage.ns);
    const std::int32_t keep = tree.keep_length(id);
    if (keep > 0 && !tree.shared_with_another(id, keep)) continue;
    if (victim == nullptr || e.last_used < victim->last_used) victim = &e;
  }
  if (victim == nullptr) return false;
  const std::string victim_ns = victim->lineage.ns;
  save_to_host(*victim);
  checkpoint_entry_end(*victim);
  drop(*victim);
  if (victim_ns != ns) repin(victim_ns);
  return true;
}

// Moves an entry's K/V to the host tier, then gives up its cells that nobody else uses.
void PrefixCache::Impl::demote(DeviceEntry& e) {
  const std::string ns = e.lineage.ns;
  save_to_host(e);
  checkpoint_entry_end(e);
  cut_back(e);
  repin(ns);
}

void PrefixCache::Impl::save_to_host(const DeviceEntry& e) {
  // What stays on the device (locked, or held by another entry) is not copied: the host tier gets
  // it when the device gives it up, and a restore takes those positions from the device.
  const std::int32_t keep = trees_.at(e.lineage.ns).keep_length(e.id);
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

// Cuts an entry back to `at_least` tokens or to what others use of it (locked cells, or a prefix
// another entry holds), whichever is longer: dropped whole when that is nothing or another entry
// holds it all.
void PrefixCache::Impl::cut_back(DeviceEntry& e, std::int32_t at_least) {
  RadixTree& tree = trees_.at(e.lineage.ns);
  const std::int32_t keep = std::max(at_least, tree.keep_length(e.id));
  if (keep == 0 || tree.shared_with_another(e.id, keep) || !engine::has_attention_cells(engine_.model())) {
    drop(e);
    return;
  }
  if (keep >= static_cast<std::int32_t>(e.tokens.size())) return;  // others use all of it
  if (!trimmable() && e.state_at_end) {
    // A recurrent state cannot be cut back: without it, the attention cells can be.
    engine_.drop_checkpoint_state(e.holder);
    e.state_at_end = false;
    e.window_from = keep;  // no window cells are left
  }
  engine_.remove_sequence(e.holder, keep, -1);
  e.window_from = std::min<engine::Pos>(e.window_from, keep);
  tree.truncate(e.id, keep);
  e.tokens.resize(static_cast<size_t>(keep));
}

void PrefixCache::Impl::drop(DeviceEntry& e) {
  engine_.remove_sequence(e.holder, 0, -1);
  free_holders_.push_back(e.holder);
  if (auto tree = trees_.find(e.lineage.ns); tree != trees_.end()) tree->second.erase(e.id);
  entries_.erase(e.id);
}

void PrefixCache::Impl::add_evictions(const HostStore::Evicted& evicted) {
  stats_.evictions_lru += evicted.lru;
  stats_.evictions_ttl += evicted.ttl;
  stats_.evictions_capacity += evicted.capacity;
}

}  // namespace prefixd::cache
