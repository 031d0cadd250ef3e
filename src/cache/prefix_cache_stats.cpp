#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

std::string PrefixCache::Impl::verify(bool against_engine) const {
  std::string problems = device_.verify(against_engine);
  for (const auto& [seq, lease] : leases_) {
    if (lease.locked > lease.computed) problems += "a lease locks more than it holds; ";
    // Cut-back families: a running sequence holds every position it computed, from 0 (with the
    // full window cache, the pin keeps libllama from taking over its cells below its window).
    if (against_engine && trimmable() && lease.computed > 0) {
      const engine::PosRange held = engine_.sequence_positions(seq);
      if (held.min != 0 || held.max + 1 < lease.computed) {
        problems += "sequence " + std::to_string(seq) + " holds positions " + std::to_string(held.min) + " to " +
                    std::to_string(held.max) + " in the engine, not 0 to " + std::to_string(lease.computed - 1) + "; ";
      }
    }
  }
  problems += host_.store().verify_lru_order();
  if (std::string c = checkpoints_.verify(); !c.empty()) problems += c + "; ";
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
  if (cells != device_.cells() || device != static_cast<std::int64_t>(device_.entries().size())) {
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
  if (backing_.remote() != nullptr) out.remote = backing_.remote()->stats();  // its threads move these between snapshots
  if (backing_.disk() != nullptr) {  // the writer thread moves these between snapshots
    DiskStats disk = backing_.disk()->stats();
    disk.hits = out.disk.hits;
    disk.promoted_segments = out.disk.promoted_segments;
    disk.promoted_checkpoints = out.disk.promoted_checkpoints;
    out.disk = std::move(disk);
    for (auto& [scope, scoped] : out.scopes) scoped.disk = {};
    for (const auto& [scope, usage] : backing_.disk()->usage_by_scope()) out.scopes[scope].disk = usage;
  }
  return out;
}

void PrefixCache::Impl::record(const Acquisition& got, const ScopeId& scope, std::int64_t prompt_tokens) {
  counters_.count_outcome(got, scope, prompt_tokens);
  if (got.tier == Tier::remote && backing_.remote() != nullptr) backing_.remote()->count_hit();
}

void PrefixCache::Impl::rebuild_pin() {
  if (pin_ < 0) return;
  unpin_all(engine_, pin_);
  for (const auto& [id, e] : device_.entries()) pin_cells(engine_, pin_, e.holder, 0, -1);
  // A running sequence's every cell: what it adopted while its acquire is still under way (its
  // `computed` is set when the acquire ends) and the tokens it generated, as well as its prompt.
  for (const auto& [seq, lease] : leases_) pin_cells(engine_, pin_, seq, 0, -1);
}

void PrefixCache::Impl::publish() {
  rebuild_pin();  // every mutating call ends here: entries and running prefixes may have changed
  // Each part's own stats, with the counters the coordinator moves for the device and host tiers.
  const CacheStats& counted = counters_.totals;
  CacheStats s;
  s.requests = counted.requests;
  s.requests.running = static_cast<std::int64_t>(leases_.size());
  s.requests.waiting = std::ranges::count_if(leases_, [](const auto& kv) { return kv.second.waits_for.has_value(); });
  s.disk = counted.disk;
  s.disk.promoted_segments = backing_.promoted_segments();
  s.disk.promoted_checkpoints = backing_.promoted_checkpoints();
  s.remote = counted.remote;
  s.enabled = config_.enabled;
  s.apc_enabled = config_.apc_enabled && can_reuse();
  s.device = device_.stats();
  s.device.cells_budget = *config_.device_cells;
  s.device.states = trimmable() ? 0 : std::ranges::count_if(device_.entries(), [](const auto& kv) { return kv.second.state_at_end; });
  s.device.demotions = counted.device.demotions;
  s.device.evictions = counted.device.evictions;
  s.device.evictions_ttl = counted.device.evictions_ttl;
  s.device.compactions = counted.device.compactions;
  s.host = host_.store().stats();
  s.host.max_segments = config_.host_max_segments;
  s.host.capacity_bytes = config_.host_capacity_bytes;
  s.host.evictions_lru = counted.host.evictions_lru;
  s.host.evictions_ttl = counted.host.evictions_ttl;
  s.host.evictions_capacity = counted.host.evictions_capacity;
  s.host.failed_restores = counted.host.failed_restores;
  s.reuse_mode = reuse_mode_name(family_.mode());
  s.checkpoints = checkpoints_.stats();
  s.retained = retentions_.stats();
  s.block_size = config_.block_size;
  s.hash = hash_algorithm_name(config_.hash);
  std::int64_t blocks = 0, active = 0;
  for (const auto& [id, e] : device_.entries()) {
    const auto whole = static_cast<std::int64_t>(e.tokens.size()) / config_.block_size;
    blocks += whole;
    active += whole > 0 ? 1 : 0;
  }
  const std::int64_t host_blocks = host_.store().tokens() / config_.block_size;
  s.total_blocks_stored = blocks + host_blocks;
  s.unique_block_hashes = s.device.cells / config_.block_size + host_blocks;
  s.apc_active_entries = active;
  s.scopes = scope_snapshot();
  std::lock_guard lock(published_mutex_);
  published_ = std::move(s);
}

}  // namespace prefixd::cache
