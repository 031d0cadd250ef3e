#include "cache/device_tier.h"

#include <algorithm>
#include <spdlog/spdlog.h>

namespace prefixd::cache {

DeviceTier::DeviceTier(engine::Engine& engine, const Family& family, std::vector<engine::SeqId> holders,
                       engine::SeqId scratch, bool checked)
    : engine_(engine), family_(family), holder_count_(static_cast<std::int64_t>(holders.size())),
      free_holders_(std::move(holders)), scratch_(scratch), checked_(checked),
      kv_bytes_per_token_(engine.model().kv_bytes_per_token) {
  std::reverse(free_holders_.begin(), free_holders_.end());  // the lowest id is taken first
}

DeviceEntry* DeviceTier::find(EntryId id) {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

RadixTree* DeviceTier::tree(const std::string& ns) {
  auto it = trees_.find(ns);
  return it == trees_.end() ? nullptr : &it->second;
}

const RadixTree* DeviceTier::tree(const std::string& ns) const {
  auto it = trees_.find(ns);
  return it == trees_.end() ? nullptr : &it->second;
}

RadixTree::Match DeviceTier::match(const std::string& ns, std::span<const engine::Token> query,
                                   const std::string& session, const Reach& reach) const {
  const RadixTree* t = tree(ns);
  return t == nullptr ? RadixTree::Match{} : t->match(query, session, reach);
}

RadixTree::Match DeviceTier::match_whole(const std::string& ns, std::span<const engine::Token> query,
                                         const std::string& session, const Reach& reach) const {
  const RadixTree* t = tree(ns);
  return t == nullptr ? RadixTree::Match{} : t->match_whole(query, session, reach);
}

void DeviceTier::copy_into(EntryId id, engine::SeqId seq, std::int32_t length) {
  DeviceEntry& e = entries_.at(id);
  engine_.copy_sequence(e.holder, seq, 0, length);
  e.last_used = DeviceClock::now();
}

void DeviceTier::lock(const std::string& ns, std::span<const engine::Token> tokens, std::int32_t length) {
  trees_.at(ns).lock(tokens, length);
}

void DeviceTier::unlock(const std::string& ns, std::span<const engine::Token> tokens, std::int32_t length) {
  if (RadixTree* t = tree(ns)) t->unlock(tokens, length);
}

engine::SeqId DeviceTier::take_holder() {
  const engine::SeqId holder = free_holders_.back();
  free_holders_.pop_back();
  engine_.remove_sequence(holder, 0, -1);
  return holder;
}

DeviceEntry& DeviceTier::add(DeviceEntry entry, EntryId superseded) {
  const EntryId id = ++next_id_;
  entry.id = id;
  RadixTree& t = trees_.try_emplace(entry.lineage.ns, checked_).first->second;
  DeviceEntry& e = entries_[id] = std::move(entry);
  t.insert(id, e.tokens, e.session);
  if (superseded != 0) {
    t.erase(superseded);
    entries_.erase(superseded);  // its holder is the new entry's
  }
  newest_ = id;
  donated_since_compaction_ = true;
  return e;
}

void DeviceTier::drop(DeviceEntry& e) {
  engine_.remove_sequence(e.holder, 0, -1);
  free_holders_.push_back(e.holder);
  if (RadixTree* t = tree(e.lineage.ns)) t->erase(e.id);
  entries_.erase(e.id);
}

void DeviceTier::cut_back(DeviceEntry& e, std::int32_t at_least) {
  RadixTree& t = trees_.at(e.lineage.ns);
  const std::int32_t keep = std::max(at_least, t.keep_length(e.id));
  if (keep == 0 || t.shared_with_another(e.id, keep) || !family_.keeps_cells()) {
    drop(e);
    return;
  }
  if (keep >= static_cast<std::int32_t>(e.tokens.size())) return;  // others use all of it
  if (!family_.trimmable() && e.state_at_end) {
    // A recurrent state cannot be cut back: without it, the attention cells can be.
    engine_.drop_checkpoint_state(e.holder);
    e.state_at_end = false;
    e.window_from = keep;  // no window cells are left
  }
  engine_.remove_sequence(e.holder, keep, -1);
  e.window_from = std::min<engine::Pos>(e.window_from, keep);
  t.truncate(e.id, keep);
  e.tokens.resize(static_cast<size_t>(keep));
}

void DeviceTier::cut_path(const std::string& ns, std::span<const engine::Token> tokens, const std::string& session,
                          const Reach& reach, std::int32_t keep, std::int32_t target, ResetReport& report) {
  std::vector<EntryId> on_path;
  for (const auto& [id, e] : entries_) {
    if (e.lineage.ns != ns) continue;
    std::int32_t shared = common_prefix(e.tokens, tokens);
    if (!(reach.own && e.session == session)) shared = std::min(shared, reach.others);
    if (shared > keep) on_path.push_back(id);
  }
  std::ranges::sort(on_path);
  for (EntryId id : on_path) {
    DeviceEntry& e = entries_.at(id);
    const RadixTree& t = trees_.at(ns);
    const auto length = static_cast<std::int32_t>(e.tokens.size());
    const std::int32_t others = t.keep_length(id);  // what other entries and running requests use
    if (t.locked_length(id) > target) report.locked_entries += 1;
    // A state without attention cells cannot be cut back: an entry running requests use stays.
    if (!family_.keeps_cells() && others > 0 && !t.shared_with_another(id, others)) continue;
    cut_back(e, target);
    const DeviceEntry* kept = find(id);
    if (kept == nullptr || static_cast<std::int32_t>(kept->tokens.size()) < length) report.entries += 1;
  }
}

std::int64_t DeviceTier::drop_namespace(const std::string& ns) {
  std::int64_t dropped = 0;
  std::erase_if(entries_, [&](const auto& item) {
    const DeviceEntry& e = item.second;
    if (e.lineage.ns != ns) return false;
    engine_.remove_sequence(e.holder, 0, -1);
    free_holders_.push_back(e.holder);
    dropped += 1;
    return true;
  });
  trees_.erase(ns);
  return dropped;
}

void DeviceTier::clear() {
  for (auto& [id, e] : entries_) {
    engine_.remove_sequence(e.holder, 0, -1);
    free_holders_.push_back(e.holder);
  }
  entries_.clear();
  trees_.clear();
}

void DeviceTier::erase_if_empty(const std::string& ns) {
  if (auto it = trees_.find(ns); it != trees_.end() && it->second.size() == 0) trees_.erase(it);
}

DeviceEntry* DeviceTier::least_recently_used(const std::function<bool(const DeviceEntry&)>& eligible) {
  DeviceEntry* victim = nullptr;
  for (auto& [id, e] : entries_) {
    if (!eligible(e) || !trees_.contains(e.lineage.ns)) continue;
    const RadixTree& t = trees_.at(e.lineage.ns);
    const std::int32_t keep = t.keep_length(id);
    if (keep >= static_cast<std::int32_t>(e.tokens.size())) continue;  // frees nothing
    // A state without attention cells cannot be cut back, only dropped: not while a running
    // request's lock covers part of it alone (the tree keeps every locked node on an entry).
    if (!family_.keeps_cells() && keep > 0 && !t.shared_with_another(id, keep)) continue;
    if (evicts_before(e, victim)) victim = &e;
  }
  return victim;
}

DeviceEntry* DeviceTier::least_recently_used_droppable() {
  DeviceEntry* victim = nullptr;
  for (auto& [id, e] : entries_) {
    const RadixTree& t = trees_.at(e.lineage.ns);
    const std::int32_t keep = t.keep_length(id);
    if (keep > 0 && !t.shared_with_another(id, keep)) continue;
    if (evicts_before(e, victim)) victim = &e;
  }
  return victim;
}

bool DeviceTier::evicts_before(const DeviceEntry& e, const DeviceEntry* victim) const {
  if (victim == nullptr) return true;
  const bool kept = retained(e), victim_kept = retained(*victim);
  if (kept != victim_kept) return !kept;
  return e.last_used < victim->last_used;
}

std::int64_t DeviceTier::cells() const {
  if (!family_.keeps_cells()) return 0;  // holders keep states, not cells
  std::int64_t total = 0;
  for (const auto& [ns, t] : trees_) total += t.unique_tokens();
  return total;
}

std::int64_t DeviceTier::locked_cells() const {
  if (!family_.keeps_cells()) return 0;
  std::int64_t total = 0;
  for (const auto& [ns, t] : trees_) total += t.locked_tokens();
  return total;
}

std::int64_t DeviceTier::budgeted_idle_cells() const {
  std::int64_t own = 0;
  if (auto it = entries_.find(newest_); it != entries_.end()) {
    const DeviceEntry& e = it->second;
    own = static_cast<std::int64_t>(e.tokens.size()) - trees_.at(e.lineage.ns).locked_length(e.id);
  }
  return cells() - locked_cells() - own;
}

std::int64_t DeviceTier::cells_of(const std::string& ns) const {
  const RadixTree* t = tree(ns);
  return family_.keeps_cells() && t != nullptr ? t->unique_tokens() : 0;
}

DeviceTier::Compacted DeviceTier::compact() {
  donated_since_compaction_ = false;
  struct Item {
    DeviceEntry* entry;
    const Item* base = nullptr;
    std::int32_t shared = 0;
    engine::Bytes tail;
  };
  std::vector<Item> items;
  for (auto& [id, e] : entries_) items.push_back(Item{&e});
  std::ranges::sort(items, [](const Item& a, const Item& b) { return a.entry->id < b.entry->id; });
  Compacted out;
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
      if (item.tail.empty()) return {};  // nothing has been changed yet
    }
    out.cells += n - item.shared;
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
    // The base's cells came with its window cells, which lie below this entry's last window.
    if (ok[i] && item.base != nullptr) keep_only_window(item.entry->holder, n);
  }
  for (EntryId id : lost) drop(entries_.at(id));
  out.lost = static_cast<std::int64_t>(lost.size());
  return out;
}

std::string DeviceTier::verify(bool against_engine) const {
  std::string problems;
  // Trimmable models: a holder holds exactly its entry's positions. (A checkpoint family's holder
  // may keep only attention cells while its state lives in a checkpoint; libllama then reports the
  // recurrent part's positions, so the check would not say anything about the cells.)
  if (against_engine && family_.trimmable()) {
    for (const auto& [id, e] : entries_) {
      const engine::PosRange held = engine_.sequence_positions(e.holder);
      if (held.min != 0 || held.max + 1 != static_cast<engine::Pos>(e.tokens.size())) {
        problems += "entry " + std::to_string(id) + " holds positions " + std::to_string(held.min) + " to " + std::to_string(held.max) +
                    " in the engine, not to " + std::to_string(e.tokens.size() - 1) + "; ";
      }
    }
  }
  // Window-only models: a holder keeps no window cell below its last window (keep_only_window),
  // else running requests that adopt it share cells the window cache cannot spare.
  if (against_engine && family_.keeps_only_window()) {
    for (const auto& [id, e] : entries_) {
      const engine::PosRange window = engine_.sequence_positions(e.holder);
      const engine::Pos from = kept_window_from(static_cast<engine::Pos>(e.tokens.size()));
      if (!window.empty() && window.min < from) {
        problems += "entry " + std::to_string(id) + " keeps window cells from " + std::to_string(window.min) +
                    ", below its last window at " + std::to_string(from) + "; ";
      }
    }
  }
  std::int64_t entries = 0;
  for (const auto& [ns, t] : trees_) {
    entries += static_cast<std::int64_t>(t.size());
    if (t.locked_tokens() > t.unique_tokens()) problems += "more locked than held tokens; ";
  }
  if (entries != static_cast<std::int64_t>(entries_.size())) problems += "tree entries differ from device entries; ";
  for (const auto& [id, e] : entries_) {
    const auto it = trees_.find(e.lineage.ns);
    if (it == trees_.end() || !it->second.contains(id) ||
        it->second.length(id) != static_cast<std::int32_t>(e.tokens.size())) {
      problems += "entry " + std::to_string(id) + " is not in its tree as stored; ";
    }
    if (family_.trimmable() && !e.state_at_end) problems += "a trimmable entry lost its state; ";
  }
  if (static_cast<std::int64_t>(entries_.size() + free_holders_.size()) != holder_count_) problems += "holders leaked; ";
  return problems;
}

std::vector<EntryId> DeviceTier::refresh_windows() {
  std::vector<EntryId> broken;
  if (family_.window() == 0) return broken;
  for (auto& [id, e] : entries_) {
    if (family_.may_lose_start()) {
      if (!holds_its_start(e.holder, static_cast<std::int32_t>(e.tokens.size()))) broken.push_back(id);
      continue;
    }
    e.window_from = window_run(e.holder, e.window_from);
    const auto n = static_cast<engine::Pos>(e.tokens.size());
    if (!family_.window_intact(e.window_from, n)) e.state_at_end = false;
  }
  return broken;
}

bool DeviceTier::holds_its_start(engine::SeqId seq, std::int32_t length) const {
  if (!family_.may_lose_start()) return true;
  const engine::PosRange cells = engine_.sequence_positions(seq);
  if (cells.empty()) return length <= 0;
  return cells.min == 0 && (length < 0 || cells.max == length - 1);
}

engine::Pos DeviceTier::window_run(engine::SeqId seq, engine::Pos tracked) const {
  if (!family_.keeps_only_window()) return 0;
  return std::max(tracked, engine_.sequence_positions(seq).min);
}

engine::Pos DeviceTier::kept_window_from(engine::Pos end) const {
  return family_.window_start(end);
}

void DeviceTier::keep_only_window(engine::SeqId holder, engine::Pos end) {
  const engine::Pos from = kept_window_from(end);
  // A stream of its own keeps the holder's cells whatever it lets go of: nothing to win there.
  if (!family_.keeps_only_window() || !family_.shares_cells() || from <= 0 || engine_.sequence_positions(holder).min >= from) return;
  // The scratch sequence keeps the attention cells below `from` while the holder lets go of them,
  // then gives up its own window cells (drop_checkpoint_state touches only those), so copying
  // back returns the attention cells alone to the holder. REQUIRES: the scratch sequence is empty
  // (it is again on return).
  engine_.copy_sequence(holder, scratch_, 0, from);
  engine_.remove_sequence(holder, 0, from);
  engine_.drop_checkpoint_state(scratch_);
  engine_.copy_sequence(scratch_, holder, 0, from);
  engine_.remove_sequence(scratch_, 0, -1);
}

}  // namespace prefixd::cache
