#include "api/control/cache_report.h"

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
    out[cache::outcome_name(static_cast<cache::Outcome>(i))] = s.outcomes[static_cast<size_t>(i)];
  }
  return out;
}

nlohmann::ordered_json snapshots_json(const cache::CacheStats& s) {
  return {
      {"entries", s.checkpoints},
      {"max_entries", s.checkpoint_max_entries},
      {"bytes", s.checkpoint_bytes},
      {"capacity_bytes", s.checkpoint_capacity_bytes},
      {"sessions", s.checkpoint_sessions},
      {"saved", s.checkpoints_saved},
      {"restores", s.checkpoints_restored},
      {"evictions", {{"lru", s.checkpoint_evictions_lru}, {"ttl", s.checkpoint_evictions_ttl},
                     {"capacity", s.checkpoint_evictions_capacity}, {"superseded", s.checkpoints_superseded}}},
      {"refusals", {{"diverged", s.checkpoint_refusals_diverged}, {"evicted", s.checkpoint_refusals_evicted},
                    {"namespace", s.checkpoint_refusals_namespace}}},
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
      {"hits", s.hits},
      {"misses", s.misses},
      {"tokens_reused", s.tokens_reused},
      {"outcomes", outcomes_json(s)},
      {"inflight_shares", s.inflight_shares},
      {"evictions", {{"lru", s.evictions_lru}, {"ttl", s.evictions_ttl}, {"capacity", s.evictions_capacity},
                     {"device", s.device_evictions}}},
      {"demotions", s.demotions},
      {"failed_restores", s.failed_restores},
      {"compactions", s.compactions},
      {"tiers",
       {{"device", {{"entries", s.device_entries}, {"max_entries", s.device_holders}, {"cells", s.device_cells},
                    {"locked_cells", s.device_locked_cells}, {"bytes", s.device_bytes},
                    {"budget_cells", s.device_cells_budget}, {"states", s.device_states}}},
        {"host", {{"entries", s.host_entries}, {"max_entries", s.host_max_segments}, {"bytes", s.host_bytes},
                  {"capacity_bytes", s.host_capacity_bytes}}},
        {"disk", disk_json(s.disk)},
        {"remote", remote_json(s.remote)}}},
      {"snapshots", snapshots_json(s)},
      {"retained", {{"prefixes", s.retained_prefixes},
                    {"tokens", s.retained_tokens},
                    {"budget_tokens_per_tenant", s.retain_tokens_budget},
                    {"added", s.retentions_added},
                    {"renewed", s.retentions_renewed},
                    {"refused", s.retentions_refused},
                    {"lifted", s.retentions_lifted},
                    {"expired", s.retentions_expired}}},
      {"running", s.running},
      {"waiting", s.waiting},
      {"entries", s.device_entries + s.host_entries + s.checkpoints},
      {"bytes", s.device_bytes + s.host_bytes + s.checkpoint_bytes},
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
class MetricsText {
 public:
  // A family with one unlabeled sample.
  template <typename T>
  void single(std::string_view name, std::string_view type, std::string_view help, T value) {
    header(name, type, help);
    out_ += std::format("{} {}\n", name, value);
  }
  // A family with one sample per value of `label`.
  template <typename T>
  void labeled(std::string_view name, std::string_view type, std::string_view help, std::string_view label,
               std::span<const std::pair<std::string_view, T>> samples) {
    header(name, type, help);
    for (const auto& [value, sample] : samples) out_ += std::format("{}{{{}=\"{}\"}} {}\n", name, label, value, sample);
  }
  std::string take() { return std::move(out_); }

 private:
  void header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += std::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  std::string out_;
};

}  // namespace

std::string cache_metrics_text(const cache::CacheStats& s) {
  using Count = std::pair<std::string_view, std::int64_t>;
  using Size = std::pair<std::string_view, std::uint64_t>;
  MetricsText m;
  m.single("prefixd_prompt_cache_hits_total", "counter", "Requests that reused a cached prefix.", s.hits);
  m.single("prefixd_prompt_cache_misses_total", "counter", "Cache-enabled requests that found no reusable prefix.",
           s.misses);
  m.single("prefixd_prompt_cache_prefix_tokens_reused_total", "counter",
           "Prompt tokens taken from the cache instead of computed.", s.tokens_reused);
  std::vector<Count> outcomes;
  for (int i = 0; i < cache::kOutcomeCount; ++i) {
    outcomes.emplace_back(cache::outcome_name(static_cast<cache::Outcome>(i)), s.outcomes[static_cast<size_t>(i)]);
  }
  m.labeled<std::int64_t>("prefixd_prompt_cache_requests_total", "counter",
                          "Requests by what the prompt cache did for them.", "outcome", outcomes);
  m.single("prefixd_prompt_cache_inflight_shares_total", "counter", "Hits taken from another running request's cells.",
           s.inflight_shares);
  m.labeled<std::int64_t>("prefixd_prompt_cache_evictions_total", "counter",
                          "Cached entries or segments dropped, by reason.", "reason",
                          std::array{Count{"lru", s.evictions_lru}, Count{"ttl", s.evictions_ttl},
                           Count{"capacity", s.evictions_capacity}, Count{"device", s.device_evictions}});
  m.single("prefixd_prompt_cache_demotions_total", "counter", "Device-tier entries moved to the host tier.", s.demotions);
  m.single("prefixd_prompt_cache_failed_restores_total", "counter", "Host segments that could not be restored.",
           s.failed_restores);
  m.single("prefixd_prompt_cache_compactions_total", "counter",
           "Times idle device entries were rewritten at the low end of the context.", s.compactions);
  m.labeled<std::uint64_t>("prefixd_prompt_cache_bytes", "gauge", "Bytes of K/V held, by tier.", "tier",
                           std::array{Size{"device", s.device_bytes}, Size{"host", s.host_bytes}});
  m.labeled<std::int64_t>("prefixd_prompt_cache_entries", "gauge", "Entries held, by tier (host: segments).", "tier",
                          std::array{Count{"device", s.device_entries}, Count{"host", s.host_entries}});
  m.labeled<std::int64_t>("prefixd_prompt_cache_device_cells", "gauge",
                          "KV cells held by device-tier entries, and of those the ones running requests use.", "state",
                          std::array{Count{"held", s.device_cells}, Count{"locked", s.device_locked_cells}});
  m.single("prefixd_prompt_cache_capacity_bytes", "gauge", "Host-tier byte budget.", s.host_capacity_bytes);
  m.single("prefixd_prompt_cache_snapshots", "gauge", "Checkpoints held (recurrent state or window cells after a prefix).",
           s.checkpoints);
  m.single("prefixd_prompt_cache_snapshot_bytes", "gauge", "Bytes of checkpoints held.", s.checkpoint_bytes);
  m.single("prefixd_prompt_cache_snapshots_saved_total", "counter", "Checkpoints taken.", s.checkpoints_saved);
  m.single("prefixd_prompt_cache_snapshot_restores_total", "counter", "Requests resumed from a checkpoint.",
           s.checkpoints_restored);
  m.labeled<std::int64_t>("prefixd_prompt_cache_snapshot_evictions_total", "counter", "Checkpoints dropped, by reason.",
                          "reason",
                          std::array{Count{"lru", s.checkpoint_evictions_lru}, Count{"ttl", s.checkpoint_evictions_ttl},
                           Count{"capacity", s.checkpoint_evictions_capacity},
                           Count{"superseded", s.checkpoints_superseded}});
  m.labeled<std::int64_t>("prefixd_prompt_cache_snapshot_refusals_total", "counter",
                          "Requests a session's longer checkpoint could not serve, by cause.", "cause",
                          std::array{Count{"diverged", s.checkpoint_refusals_diverged},
                           Count{"evicted", s.checkpoint_refusals_evicted},
                           Count{"namespace", s.checkpoint_refusals_namespace}});
  m.single("prefixd_prompt_cache_retained_prefixes", "gauge",
           "Prefixes kept ahead of LRU eviction until their deadline (cache_control TTLs).", s.retained_prefixes);
  m.single("prefixd_prompt_cache_retained_tokens", "gauge", "Tokens of the retained prefixes.", s.retained_tokens);
  m.labeled<std::int64_t>("prefixd_prompt_cache_retentions_total", "counter",
                          "Retention asks, by what became of them.", "result",
                          std::array{Count{"added", s.retentions_added}, Count{"renewed", s.retentions_renewed},
                           Count{"refused", s.retentions_refused}, Count{"lifted", s.retentions_lifted},
                           Count{"expired", s.retentions_expired}});
  const cache::DiskStats& d = s.disk;
  m.single("prefixd_prompt_cache_disk_files", "gauge", "Files in the disk tier (segments and checkpoints).", d.files);
  m.single("prefixd_prompt_cache_disk_bytes", "gauge", "Bytes of the disk tier's files.", d.bytes);
  m.single("prefixd_prompt_cache_disk_capacity_bytes", "gauge", "The disk tier's byte cap (0: no disk tier).",
           d.enabled ? d.capacity_bytes : 0);
  m.single("prefixd_prompt_cache_disk_hits_total", "counter", "Requests whose reused prefix came in part from disk.",
           d.hits);
  m.single("prefixd_prompt_cache_disk_reads_total", "counter", "Disk-tier files read and verified.", d.reads);
  m.single("prefixd_prompt_cache_disk_read_bytes_total", "counter", "Bytes read from the disk tier.", d.read_bytes);
  m.single("prefixd_prompt_cache_disk_read_seconds_total", "counter", "Time spent reading and verifying disk files.",
           d.read_seconds);
  m.single("prefixd_prompt_cache_disk_writes_total", "counter", "Disk-tier files written.", d.writes);
  m.single("prefixd_prompt_cache_disk_write_bytes_total", "counter", "Bytes written to the disk tier.", d.write_bytes);
  m.single("prefixd_prompt_cache_disk_write_errors_total", "counter",
           "Disk-tier files that could not be written (no space, read-only, ...).", d.write_errors);
  m.single("prefixd_prompt_cache_disk_writes_dropped_total", "counter",
           "Write-behind jobs dropped because the queue was full.", d.writes_dropped);
  m.single("prefixd_prompt_cache_disk_queue_bytes", "gauge", "Bytes waiting to be written to the disk tier.",
           d.queue_bytes);
  std::vector<Count> removed;
  for (int i = 0; i < cache::kDiskRemovalCount; ++i) {
    removed.emplace_back(cache::disk_removal_name(static_cast<cache::DiskRemoval>(i)), d.removed[static_cast<size_t>(i)]);
  }
  m.labeled<std::int64_t>("prefixd_prompt_cache_disk_removed_total", "counter",
                          "Disk-tier files removed, by reason (capacity, superseded tails, failed verification: "
                          "checksum, truncated, foreign, version; incomplete temporaries; reset; gc).",
                          "reason", removed);
  const cache::RemoteStats& r = s.remote;
  m.single("prefixd_cache_remote_enabled", "gauge", "1 when a shared tier (--cache-remote) is configured.",
           r.enabled ? 1 : 0);
  m.single("prefixd_cache_remote_hits_total", "counter",
           "Requests whose reused prefix reached into what the shared tier gave.", r.hits);
  m.single("prefixd_cache_remote_lookups_total", "counter", "Prompts looked up in the shared tier.", r.fetches);
  m.single("prefixd_cache_remote_lookup_hits_total", "counter",
           "Shared-tier lookups that brought back at least one usable value.", r.fetch_hits);
  m.single("prefixd_cache_remote_lookup_timeouts_total", "counter",
           "Shared-tier lookups a request stopped waiting for at --cache-remote-timeout-ms.", r.fetch_timeouts);
  m.single("prefixd_cache_remote_lookup_seconds_total", "counter",
           "Wall time of shared-tier lookups run (mean latency: divide by the lookups run).",
           static_cast<double>(r.fetch_latency_us_sum) / 1e6);
  m.single("prefixd_cache_remote_lookups_run_total", "counter",
           "Shared-tier lookups the reader ran (a lookup whose deadline passed in the queue is not run).",
           r.fetch_latency_count);
  m.single("prefixd_cache_remote_misses_total", "counter", "Shared-tier GETs that found nothing (or failed).",
           r.gets_missed);
  m.single("prefixd_cache_remote_gets_hit_total", "counter", "Shared-tier GETs that returned a value.", r.gets_hit);
  m.single("prefixd_cache_remote_read_bytes_total", "counter", "Value bytes read from the shared tier.", r.bytes_read);
  m.single("prefixd_cache_remote_write_bytes_total", "counter", "Value bytes written to the shared tier.",
           r.bytes_written);
  m.single("prefixd_cache_remote_writes_total", "counter", "Values written to the shared tier.", r.writes);
  m.single("prefixd_cache_remote_writes_dropped_total", "counter",
           "Shared-tier writes dropped because the write-behind queue was full.", r.writes_dropped);
  m.single("prefixd_cache_remote_errors_total", "counter",
           "Shared-tier commands that failed (connection refused, timeout, server error).", r.errors);
  m.single("prefixd_cache_remote_bad_values_total", "counter",
           "Shared-tier values that failed verification (checksum, foreign model, wrong content): deleted, never used.",
           r.bad_values);
  m.single("prefixd_cache_remote_promoted_segments_total", "counter",
           "Segments from the shared tier adopted into the host tier.", r.promoted_segments);
  m.single("prefixd_cache_remote_promoted_checkpoints_total", "counter",
           "Checkpoints from the shared tier adopted into the checkpoint store.", r.promoted_checkpoints);
  m.single("prefixd_cache_remote_queue_bytes", "gauge", "Bytes waiting to be written to the shared tier.",
           r.queued_bytes);
  return m.take();
}

std::string ttft_metrics_text(const scheduler::SchedulerStats& stats) {
  std::string out =
      "# HELP prefixd_time_to_first_token_seconds Time from a request's arrival to its first generated token.\n"
      "# TYPE prefixd_time_to_first_token_seconds histogram\n";
  const auto& bounds = scheduler::SchedulerStats::kTtftBounds;
  for (size_t i = 0; i < bounds.size(); ++i) {
    out += std::format("prefixd_time_to_first_token_seconds_bucket{{le=\"{}\"}} {}\n", bounds[i], stats.ttft_buckets[i]);
  }
  out += std::format("prefixd_time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {}\n", stats.ttft_count);
  out += std::format("prefixd_time_to_first_token_seconds_sum {}\n", stats.ttft_sum_seconds);
  out += std::format("prefixd_time_to_first_token_seconds_count {}\n", stats.ttft_count);
  return out;
}

}  // namespace prefixd::api
