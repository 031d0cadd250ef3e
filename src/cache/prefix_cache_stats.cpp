#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

std::string PrefixCache::Impl::verify(bool against_engine) const {
  std::string problems;
  // Trimmable models: a holder holds exactly its entry's positions. (A checkpoint family's holder
  // may keep only attention cells while its state lives in a checkpoint; libllama then reports the
  // recurrent part's positions, so the check would not say anything about the cells.)
  if (against_engine && trimmable()) {
    for (const auto& [id, e] : entries_) {
      const engine::PosRange held = engine_.sequence_positions(e.holder);
      if (held.max + 1 != static_cast<engine::Pos>(e.tokens.size())) {
        problems += "entry " + std::to_string(id) + " holds positions to " + std::to_string(held.max) + " in the engine, not to " +
                    std::to_string(e.tokens.size() - 1) + "; ";
      }
    }
  }
  std::int64_t entries = 0;
  for (const auto& [ns, tree] : trees_) {
    entries += static_cast<std::int64_t>(tree.size());
    if (tree.locked_tokens() > tree.unique_tokens()) problems += "more locked than held tokens; ";
  }
  if (entries != static_cast<std::int64_t>(entries_.size())) problems += "tree entries differ from device entries; ";
  for (const auto& [id, e] : entries_) {
    const auto it = trees_.find(e.lineage.ns);
    if (it == trees_.end() || !it->second.contains(id) ||
        it->second.length(id) != static_cast<std::int32_t>(e.tokens.size())) {
      problems += "entry " + std::to_string(id) + " is not in its tree as stored; ";
    }
  }
  if (static_cast<std::int64_t>(entries_.size() + free_holders_.size()) != holder_count_) problems += "holders leaked; ";
  for (const auto& [seq, lease] : leases_) {
    if (lease.locked > lease.computed) problems += "a lease locks more than it holds; ";
  }
  problems += host_.store().verify_lru_order();
  if (std::string c = checkpoints_.verify(); !c.empty()) problems += c + "; ";
  for (const auto& [id, e] : entries_) {
    if (trimmable() && !e.state_at_end) problems += "a trimmable entry lost its state; ";
  }
  // What is reported per scope adds up to the totals.
  std::int64_t cells = 0, device = 0, segments = 0, checkpoints = 0;
  std::uint64_t host_bytes = 0, checkpoint_bytes = 0;
  for (const auto& [scope, scoped] : scope_snapshot()) {
    cells += scoped.device_cells;
    device += scoped.device_entries;
    segments += scoped.host.entries;
    host_bytes += scoped.host.bytes;
    checkpoints += scoped.checkpoints.entries;
    checkpoint_bytes += scoped.checkpoints.bytes;
  }
  if (cells != device_cells() || device != static_cast<std::int64_t>(entries_.size())) {
    problems += "device cells or entries per scope do not add up; ";
  }
  if (segments != static_cast<std::int64_t>(host_.store().size()) || host_bytes != host_.store().bytes()) {
    problems += "host segments per scope do not add up; ";
  }
  if (checkpoints != static_cast<std::int64_t>(checkpoints_.size()) || checkpoint_bytes != checkpoints_.bytes()) {
    problems += "checkpoints per scope do not add up; ";
  }
  return problems;
}

CacheStats PrefixCache::Impl::stats() const {
  CacheStats out;
  {
    std::lock_guard lock(published_mutex_);
    out = published_;
  }
  if (remote_) out.remote = remote_->stats();  // its threads move these between snapshots
  if (disk_) {  // the writer thread moves these between snapshots
    DiskStats disk = disk_->stats();
    disk.hits = out.disk.hits;
    disk.promoted_segments = out.disk.promoted_segments;
    disk.promoted_checkpoints = out.disk.promoted_checkpoints;
    out.disk = std::move(disk);
    for (auto& [scope, scoped] : out.scopes) scoped.disk = {};
    for (const auto& [scope, usage] : disk_->usage_by_scope()) out.scopes[scope].disk = usage;
  }
  return out;
}

void PrefixCache::Impl::record(const Acquisition& got, const ScopeId& scope) {
  ScopeStats& scoped = scope_counters_[scope];
  stats_.outcomes[static_cast<size_t>(got.outcome)] += 1;
  scoped.outcomes[static_cast<size_t>(got.outcome)] += 1;
  if (got.outcome == Outcome::bypass) return;
  if (got.tier == Tier::disk) {
    stats_.disk.hits += 1;
    scoped.disk_hits += 1;
  }
  if (got.tier == Tier::remote) {
    scoped.remote_hits += 1;
    if (remote_) remote_->count_hit();
  }
  if (got.reused > 0) {
    stats_.hits += 1;
    stats_.tokens_reused += got.reused;
    scoped.hits += 1;
    scoped.tokens_reused += got.reused;
  } else {
    stats_.misses += 1;
    scoped.misses += 1;
  }
}

void PrefixCache::Impl::rebuild_pin() {
  if (pin_ < 0) return;
  engine_.remove_sequence(pin_, 0, -1);
  for (const auto& [id, e] : entries_) engine_.copy_sequence(e.holder, pin_, 0, -1);
  for (const auto& [seq, lease] : leases_) {
    if (lease.computed > 0) engine_.copy_sequence(seq, pin_, 0, lease.computed);
  }
}

void PrefixCache::Impl::publish() {
  rebuild_pin();  // every mutating call ends here: entries and running prefixes may have changed
  CacheStats s = stats_;
  s.enabled = config_.enabled;
  s.apc_enabled = config_.apc_enabled && can_reuse();
  s.device_entries = static_cast<std::int64_t>(entries_.size());
  s.device_holders = holder_count_;
  s.device_cells = device_cells();
  s.device_locked_cells = locked_cells();
  s.device_bytes = device_bytes();
  s.device_cells_budget = *config_.device_cells;
  s.host_entries = static_cast<std::int64_t>(host_.store().size());
  s.host_max_segments = config_.host_max_segments;
  s.host_bytes = host_.store().bytes();
  s.host_capacity_bytes = config_.host_capacity_bytes;
  s.device_states = trimmable() ? 0 : std::ranges::count_if(entries_, [](const auto& kv) { return kv.second.state_at_end; });
  s.reuse_mode = reuse_mode_name(mode_);
  s.checkpoints = static_cast<std::int64_t>(checkpoints_.size());
  s.checkpoint_bytes = checkpoints_.bytes();
  s.checkpoint_capacity_bytes = checkpoints_.capacity();
  s.checkpoint_max_entries = checkpoints_.max_entries();
  s.checkpoint_sessions = static_cast<std::int64_t>(checkpoints_.sessions());
  const CheckpointStore::Counters& c = checkpoints_.counters();
  s.checkpoints_saved = c.saved;
  s.checkpoints_restored = c.restored;
  s.checkpoint_evictions_lru = c.evicted_lru;
  s.checkpoint_evictions_ttl = c.evicted_ttl;
  s.checkpoint_evictions_capacity = c.evicted_capacity;
  s.checkpoints_superseded = c.superseded;
  s.checkpoint_refusals_diverged = c.refusals[static_cast<size_t>(Refusal::diverged)];
  s.checkpoint_refusals_evicted = c.refusals[static_cast<size_t>(Refusal::evicted)];
  s.checkpoint_refusals_namespace = c.refusals[static_cast<size_t>(Refusal::ns)];
  s.running = static_cast<std::int64_t>(leases_.size());
  s.waiting = std::ranges::count_if(leases_, [](const auto& kv) { return kv.second.waits_for.has_value(); });
  s.block_size = config_.block_size;
  s.hash = hash_algorithm_name(config_.hash);
  std::int64_t blocks = 0, active = 0;
  for (const auto& [id, e] : entries_) {
    const auto whole = static_cast<std::int64_t>(e.tokens.size()) / config_.block_size;
    blocks += whole;
    active += whole > 0 ? 1 : 0;
  }
  const std::int64_t host_blocks = host_.store().tokens() / config_.block_size;
  s.total_blocks_stored = blocks + host_blocks;
  s.unique_block_hashes = s.device_cells / config_.block_size + host_blocks;
  s.apc_active_entries = active;
  s.scopes = scope_snapshot();
  std::lock_guard lock(published_mutex_);
  published_ = std::move(s);
}

}  // namespace prefixd::cache
