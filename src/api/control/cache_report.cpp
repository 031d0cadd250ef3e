#include "api/control/cache_report.h"

#include "metrics/registry.h"

#include <format>
#include <array>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace prefixd::api {
namespace {

nlohmann::ordered_json outcomes_json(const cache::CacheStats& s) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (int i = 0; i < cache::kOutcomeCount; ++i) {
    out[cache::outcome_name(static_cast<cache::Outcome>(i))] = s.requests.outcomes[static_cast<size_t>(i)];
  }
  return out;
}

nlohmann::ordered_json snapshots_json(const cache::CacheStats& s) {
  return {
      {"entries", s.checkpoints.entries},
      {"max_entries", s.checkpoints.max_entries},
      {"bytes", s.checkpoints.bytes},
      {"capacity_bytes", s.checkpoints.capacity_bytes},
      {"sessions", s.checkpoints.sessions},
      {"saved", s.checkpoints.saved},
      {"restores", s.checkpoints.restored},
      {"evictions", {{"lru", s.checkpoints.evictions_lru}, {"ttl", s.checkpoints.evictions_ttl},
                     {"capacity", s.checkpoints.evictions_capacity}, {"superseded", s.checkpoints.superseded}}},
      {"refusals", {{"diverged", s.checkpoints.refusals_diverged}, {"evicted", s.checkpoints.refusals_evicted},
                    {"namespace", s.checkpoints.refusals_namespace}}},
  };
}

nlohmann::ordered_json remote_json(const cache::RemoteStats& r) {
  const double latency = r.fetch_latency_count > 0
                             ? static_cast<double>(r.fetch_latency_us_sum) / 1e6 / static_cast<double>(r.fetch_latency_count)
                             : 0.0;
  return {
      {"enabled", r.enabled},
      {"cluster", r.cluster},
      {"hits", r.hits},
      {"lookups", r.fetches},
      {"lookup_hits", r.fetch_hits},
      {"lookup_timeouts", r.fetch_timeouts},
      {"lookup_seconds_mean", latency},
      {"promoted", {{"segments", r.promoted_segments}, {"checkpoints", r.promoted_checkpoints}}},
      {"bad_values", r.bad_values},
      {"gets_hit", r.gets_hit},
      {"gets_missed", r.gets_missed},
      {"errors", r.errors},
      {"read_bytes", r.bytes_read},
      {"writes", r.writes},
      {"write_bytes", r.bytes_written},
      {"write_errors", r.write_errors},
      {"writes_dropped", r.writes_dropped},
      {"queue_bytes", r.queued_bytes},
  };
}

nlohmann::ordered_json disk_json(const cache::DiskStats& d) {
  nlohmann::ordered_json removed = nlohmann::ordered_json::object();
  for (int i = 0; i < cache::kDiskRemovalCount; ++i) {
    removed[cache::disk_removal_name(static_cast<cache::DiskRemoval>(i))] = d.removed[static_cast<size_t>(i)];
  }
  const double bandwidth = d.read_seconds > 0 ? static_cast<double>(d.read_bytes) / d.read_seconds : 0.0;
  return {
      {"enabled", d.enabled},
      {"path", d.path},
      {"entries", d.files},
      {"segments", d.segments},
      {"checkpoints", d.checkpoints},
      {"tokens", d.tokens},
      {"bytes", d.bytes},
      {"capacity_bytes", d.capacity_bytes},
      {"hits", d.hits},
      {"promoted", {{"segments", d.promoted_segments}, {"checkpoints", d.promoted_checkpoints}}},
      {"reads", d.reads},
      {"read_bytes", d.read_bytes},
      {"read_seconds", d.read_seconds},
      {"read_bytes_per_second", bandwidth},
      {"read_errors", d.read_errors},
      {"writes", d.writes},
      {"write_bytes", d.write_bytes},
      {"write_errors", d.write_errors},
      {"writes_dropped", d.writes_dropped},
      {"queue_bytes", d.queue_bytes},
      {"queue_capacity_bytes", d.queue_capacity_bytes},
      {"removed", removed},
  };
}

// The part of `bytes` of K/V (every layer's) that lives in GPU memory: the offloaded layers' share.
std::uint64_t gpu_share(std::uint64_t bytes, const engine::ModelInfo& model) {
  if (model.n_layer <= 0) return 0;
  return bytes * static_cast<std::uint64_t>(model.placement.layers_offloaded) / static_cast<std::uint64_t>(model.n_layer);
}

nlohmann::ordered_json compute_json(const engine::ModelInfo& model) {
  const engine::ModelInfo::Placement& p = model.placement;
  return {{"gpu_devices", p.devices},
          {"gpu_memory_bytes", p.device_memory_bytes},
          {"layers", model.n_layer},
          {"layers_on_gpu", p.layers_offloaded},
          {"output_on_gpu", p.output_offloaded},
          {"kv_gpu_bytes", p.kv_device_bytes}};
}

}  // namespace

nlohmann::ordered_json cache_stats_json(const cache::CacheStats& s, const engine::ModelInfo& model) {
  const std::size_t kv_bytes_per_token = model.kv_bytes_per_token;
  return {
      {"enabled", s.enabled},
      {"family", engine::family_name(model.family)},
      {"reuse", s.reuse_mode},
      {"sliding_window", model.sliding_window},
      {"swa_full", model.swa_full},
      {"apc_enabled", s.apc_enabled},
      {"hits", s.requests.hits},
      {"misses", s.requests.misses},
      {"tokens_reused", s.requests.tokens_reused},
      {"prompt_tokens", s.requests.prompt_tokens},
      {"shifted", {{"tokens", s.requests.tokens_shifted}, {"requests", s.requests.shifted_requests}}},
      {"outcomes", outcomes_json(s)},
      {"inflight_shares", s.requests.inflight_shares},
      {"evictions", {{"lru", s.host.evictions_lru}, {"ttl", s.evictions_ttl()}, {"capacity", s.host.evictions_capacity},
                     {"device", s.device.evictions}}},
      {"demotions", s.device.demotions},
      {"failed_restores", s.host.failed_restores},
      {"compactions", s.device.compactions},
      {"compute", compute_json(model)},
      {"tiers",
       {{"device", {{"entries", s.device.entries}, {"max_entries", s.device.holders}, {"cells", s.device.cells},
                    {"locked_cells", s.device.locked_cells}, {"bytes", s.device.bytes},
                    {"budget_cells", s.device.cells_budget}, {"states", s.device.states},
                    {"gpu_bytes", gpu_share(s.device.bytes, model)}}},
        {"host", {{"entries", s.host.entries}, {"max_entries", s.host.max_segments}, {"bytes", s.host.bytes},
                  {"capacity_bytes", s.host.capacity_bytes}}},
        {"disk", disk_json(s.disk)},
        {"remote", remote_json(s.remote)}}},
      {"snapshots", snapshots_json(s)},
      {"retained", {{"prefixes", s.retained.prefixes},
                    {"tokens", s.retained.tokens},
                    {"budget_tokens_per_tenant", s.retained.budget_tokens_per_scope},
                    {"added", s.retained.added},
                    {"renewed", s.retained.renewed},
                    {"refused", s.retained.refused},
                    {"lifted", s.retained.lifted},
                    {"expired", s.retained.expired}}},
      {"running", s.requests.running},
      {"waiting", s.requests.waiting},
      {"entries", s.entries()},
      {"bytes", s.bytes()},
      {"kv_bytes_per_token", kv_bytes_per_token},
      {"block_size", s.block_size},
      {"hash", s.hash},
      {"total_blocks_stored", s.total_blocks_stored},
      {"unique_block_hashes", s.unique_block_hashes},
      {"apc_active_entries", s.apc_active_entries},
  };
}

nlohmann::ordered_json cache_reset_json(const cache::ResetReport& report) {
  return {{"freed_entries", report.entries}, {"freed_bytes", report.bytes}};
}

namespace {

// Prometheus text, one family at a time: HELP and TYPE, then its samples.
// Samples of one family, one per label value.
template <typename T>
void labeled(metrics::Registry& r, metrics::Type type, std::string_view name, std::string_view help, std::string_view label,
             std::span<const std::pair<std::string_view, T>> samples) {
  for (const auto& [value, sample] : samples) {
    const metrics::Labels labels = {{std::string(label), std::string(value)}};
    if (type == metrics::Type::counter) {
      r.counter(name, help, static_cast<double>(sample), labels);
    } else {
      r.gauge(name, help, static_cast<double>(sample), labels);
    }
  }
}

}  // namespace

void add_cache_metrics(metrics::Registry& m, const cache::CacheStats& s) {
  using Count = std::pair<std::string_view, std::int64_t>;
  using Size = std::pair<std::string_view, std::uint64_t>;
  m.counter("prefixd_prompt_cache_hits_total", "Requests that reused a cached prefix.", s.requests.hits);
  m.counter("prefixd_prompt_cache_misses_total", "Cache-enabled requests that found no reusable prefix.",
           s.requests.misses);
  m.counter("prefixd_prompt_cache_prefix_tokens_reused_total", "Prompt tokens taken from the cache instead of computed.", s.requests.tokens_reused);
  m.counter("prefixd_prompt_cache_shifted_tokens_total",
            "Prompt tokens moved from later positions of a cached sequence (--cache-reuse), not computed; apart from "
            "the exact prefix tokens reused.",
            s.requests.tokens_shifted);
  m.counter("prefixd_prompt_cache_shifted_requests_total", "Requests that took tokens by shifting (--cache-reuse).",
            s.requests.shifted_requests);
  // The prefix cache in the units the field's servers report it in: tokens queried and hit.
  m.counter("prefixd_prefix_cache_queries_total",
            "Prompt tokens of requests that looked up the prefix cache (the field's prefix_cache_queries).", s.requests.prompt_tokens);
  m.counter("prefixd_prefix_cache_hits_total",
            "Prompt tokens the prefix cache served instead of computing (the field's prefix_cache_hits).",
            s.requests.tokens_reused);
  for (int t = 1; t < cache::kTierCount; ++t) {
    m.counter("prefixd_prefix_cache_hit_tokens_total", "Prompt tokens the prefix cache served, by the deepest tier used.",
              s.requests.tokens_reused_by_tier[static_cast<size_t>(t)], {{"tier", cache::tier_name(static_cast<cache::Tier>(t))}});
  }
  std::vector<Count> outcomes;
  for (int i = 0; i < cache::kOutcomeCount; ++i) {
    outcomes.emplace_back(cache::outcome_name(static_cast<cache::Outcome>(i)), s.requests.outcomes[static_cast<size_t>(i)]);
  }
  labeled<std::int64_t>(m, metrics::Type::counter, "prefixd_prompt_cache_requests_total",
                          "Requests by what the prompt cache did for them.", "outcome", outcomes);
  m.counter("prefixd_prompt_cache_inflight_shares_total", "Hits taken from another running request's cells.",
           s.requests.inflight_shares);
  labeled<std::int64_t>(m, metrics::Type::counter, "prefixd_prompt_cache_evictions_total",
                          "Cached entries or segments dropped, by reason.", "reason",
                          std::array{Count{"lru", s.host.evictions_lru}, Count{"ttl", s.evictions_ttl()},
                           Count{"capacity", s.host.evictions_capacity}, Count{"device", s.device.evictions}});
  m.counter("prefixd_prompt_cache_demotions_total", "Device-tier entries moved to the host tier.", s.device.demotions);
  m.counter("prefixd_prompt_cache_failed_restores_total", "Host segments that could not be restored.",
           s.host.failed_restores);
  m.counter("prefixd_prompt_cache_compactions_total", "Times idle device entries were rewritten at the low end of the context.", s.device.compactions);
  labeled<std::uint64_t>(m, metrics::Type::gauge, "prefixd_prompt_cache_bytes", "Bytes of K/V held, by tier.", "tier",
                           std::array{Size{"device", s.device.bytes}, Size{"host", s.host.bytes}});
  labeled<std::int64_t>(m, metrics::Type::gauge, "prefixd_prompt_cache_entries", "Entries held, by tier (host: segments).", "tier",
                          std::array{Count{"device", s.device.entries}, Count{"host", s.host.entries}});
  labeled<std::int64_t>(m, metrics::Type::gauge, "prefixd_prompt_cache_device_cells",
                          "KV cells held by device-tier entries, and of those the ones running requests use.", "state",
                          std::array{Count{"held", s.device.cells}, Count{"locked", s.device.locked_cells}});
  m.gauge("prefixd_prompt_cache_capacity_bytes", "Host-tier byte budget.", s.host.capacity_bytes);
  m.gauge("prefixd_prompt_cache_snapshots", "Checkpoints held (recurrent state or window cells after a prefix).",
           s.checkpoints.entries);
  m.gauge("prefixd_prompt_cache_snapshot_bytes", "Bytes of checkpoints held.", s.checkpoints.bytes);
  m.counter("prefixd_prompt_cache_snapshots_saved_total", "Checkpoints taken.", s.checkpoints.saved);
  m.counter("prefixd_prompt_cache_snapshot_restores_total", "Requests resumed from a checkpoint.",
           s.checkpoints.restored);
  labeled<std::int64_t>(m, metrics::Type::counter, "prefixd_prompt_cache_snapshot_evictions_total", "Checkpoints dropped, by reason.",
                          "reason",
                          std::array{Count{"lru", s.checkpoints.evictions_lru}, Count{"ttl", s.checkpoints.evictions_ttl},
                           Count{"capacity", s.checkpoints.evictions_capacity},
                           Count{"superseded", s.checkpoints.superseded}});
  labeled<std::int64_t>(m, metrics::Type::counter, "prefixd_prompt_cache_snapshot_refusals_total",
                          "Requests a session's longer checkpoint could not serve, by cause.", "cause",
                          std::array{Count{"diverged", s.checkpoints.refusals_diverged},
                           Count{"evicted", s.checkpoints.refusals_evicted},
                           Count{"namespace", s.checkpoints.refusals_namespace}});
  m.gauge("prefixd_prompt_cache_retained_prefixes", "Prefixes kept ahead of LRU eviction until their deadline (cache_control TTLs).", s.retained.prefixes);
  m.gauge("prefixd_prompt_cache_retained_tokens", "Tokens of the retained prefixes.", s.retained.tokens);
  labeled<std::int64_t>(m, metrics::Type::counter, "prefixd_prompt_cache_retentions_total",
                          "Retention asks, by what became of them.", "result",
                          std::array{Count{"added", s.retained.added}, Count{"renewed", s.retained.renewed},
                           Count{"refused", s.retained.refused}, Count{"lifted", s.retained.lifted},
                           Count{"expired", s.retained.expired}});
  const cache::DiskStats& d = s.disk;
  m.gauge("prefixd_prompt_cache_disk_files", "Files in the disk tier (segments and checkpoints).", d.files);
  m.gauge("prefixd_prompt_cache_disk_bytes", "Bytes of the disk tier's files.", d.bytes);
  m.gauge("prefixd_prompt_cache_disk_capacity_bytes", "The disk tier's byte cap (0: no disk tier).",
           d.enabled ? d.capacity_bytes : 0);
  m.counter("prefixd_prompt_cache_disk_hits_total", "Requests whose reused prefix came in part from disk.",
           d.hits);
  m.counter("prefixd_prompt_cache_disk_reads_total", "Disk-tier files read and verified.", d.reads);
  m.counter("prefixd_prompt_cache_disk_read_bytes_total", "Bytes read from the disk tier.", d.read_bytes);
  m.counter("prefixd_prompt_cache_disk_read_seconds_total", "Time spent reading and verifying disk files.",
           d.read_seconds);
  m.counter("prefixd_prompt_cache_disk_writes_total", "Disk-tier files written.", d.writes);
  m.counter("prefixd_prompt_cache_disk_write_bytes_total", "Bytes written to the disk tier.", d.write_bytes);
  m.counter("prefixd_prompt_cache_disk_write_errors_total", "Disk-tier files that could not be written (no space, read-only, ...).", d.write_errors);
  m.counter("prefixd_prompt_cache_disk_writes_dropped_total", "Write-behind jobs dropped because the queue was full.", d.writes_dropped);
  m.gauge("prefixd_prompt_cache_disk_queue_bytes", "Bytes waiting to be written to the disk tier.",
           d.queue_bytes);
  std::vector<Count> removed;
  for (int i = 0; i < cache::kDiskRemovalCount; ++i) {
    removed.emplace_back(cache::disk_removal_name(static_cast<cache::DiskRemoval>(i)), d.removed[static_cast<size_t>(i)]);
  }
  labeled<std::int64_t>(m, metrics::Type::counter, "prefixd_prompt_cache_disk_removed_total",
                          "Disk-tier files removed, by reason (capacity, superseded tails, failed verification: "
                          "checksum, truncated, foreign, version; incomplete temporaries; reset; gc).",
                          "reason", removed);
  const cache::RemoteStats& r = s.remote;
  m.gauge("prefixd_cache_remote_enabled", "1 when a shared tier (--cache-remote) is configured.",
           r.enabled ? 1 : 0);
  m.counter("prefixd_cache_remote_hits_total", "Requests whose reused prefix reached into what the shared tier gave.", r.hits);
  m.counter("prefixd_cache_remote_lookups_total", "Prompts looked up in the shared tier.", r.fetches);
  m.counter("prefixd_cache_remote_lookup_hits_total", "Shared-tier lookups that brought back at least one usable value.", r.fetch_hits);
  m.counter("prefixd_cache_remote_lookup_timeouts_total", "Shared-tier lookups a request stopped waiting for at --cache-remote-timeout-ms.", r.fetch_timeouts);
  m.counter("prefixd_cache_remote_lookup_seconds_total", "Wall time of shared-tier lookups run (mean latency: divide by the lookups run).",
           static_cast<double>(r.fetch_latency_us_sum) / 1e6);
  m.counter("prefixd_cache_remote_lookups_run_total", "Shared-tier lookups the reader ran (a lookup whose deadline passed in the queue is not run).",
           r.fetch_latency_count);
  m.counter("prefixd_cache_remote_misses_total", "Shared-tier GETs that found nothing (or failed).",
           r.gets_missed);
  m.counter("prefixd_cache_remote_gets_hit_total", "Shared-tier GETs that returned a value.", r.gets_hit);
  m.counter("prefixd_cache_remote_read_bytes_total", "Value bytes read from the shared tier.", r.bytes_read);
  m.counter("prefixd_cache_remote_write_bytes_total", "Value bytes written to the shared tier.",
           r.bytes_written);
  m.counter("prefixd_cache_remote_writes_total", "Values written to the shared tier.", r.writes);
  m.counter("prefixd_cache_remote_writes_dropped_total", "Shared-tier writes dropped because the write-behind queue was full.", r.writes_dropped);
  m.counter("prefixd_cache_remote_errors_total", "Shared-tier commands that failed (connection refused, timeout, server error).", r.errors);
  m.counter("prefixd_cache_remote_bad_values_total", "Shared-tier values that failed verification (checksum, foreign model, wrong content): deleted, never used.",
           r.bad_values);
  m.counter("prefixd_cache_remote_promoted_segments_total", "Segments from the shared tier adopted into the host tier.", r.promoted_segments);
  m.counter("prefixd_cache_remote_promoted_checkpoints_total", "Checkpoints from the shared tier adopted into the checkpoint store.", r.promoted_checkpoints);
  m.gauge("prefixd_cache_remote_queue_bytes", "Bytes waiting to be written to the shared tier.",
           r.queued_bytes);
}

void add_compute_metrics(metrics::Registry& m, const cache::CacheStats& s, const engine::ModelInfo& model) {
  const engine::ModelInfo::Placement& p = model.placement;
  m.gauge("prefixd_gpu_memory_bytes", "Memory of the GPU devices the model's layers may go to (0: none).",
          p.device_memory_bytes);
  m.gauge("prefixd_gpu_layers", "The model's repeating layers offloaded to GPU devices (--gpu-layers).", p.layers_offloaded);
  m.gauge("prefixd_gpu_kv_bytes", "Bytes of the context's K/V in GPU memory (the offloaded layers' cells).", p.kv_device_bytes);
  m.gauge("prefixd_prompt_cache_gpu_bytes", "Bytes of the device tier's K/V in GPU memory (part of prefixd_prompt_cache_bytes{tier=\"device\"}).",
          gpu_share(s.device.bytes, model));
}

}  // namespace prefixd::api
