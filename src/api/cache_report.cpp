#include "api/cache_report.h"

#include <format>

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
                  {"capacity_bytes", s.host_capacity_bytes}}}}},
      {"snapshots", snapshots_json(s)},
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

std::string cache_metrics_text(const cache::CacheStats& s) {
  std::string out;
  auto family = [&out](std::string_view name, std::string_view type, std::string_view help) {
    out += std::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("prefixd_prompt_cache_hits_total", "counter", "Requests that reused a cached prefix.");
  out += std::format("prefixd_prompt_cache_hits_total {}\n", s.hits);
  family("prefixd_prompt_cache_misses_total", "counter", "Cache-enabled requests that found no reusable prefix.");
  out += std::format("prefixd_prompt_cache_misses_total {}\n", s.misses);
  family("prefixd_prompt_cache_prefix_tokens_reused_total", "counter", "Prompt tokens taken from the cache instead of computed.");
  out += std::format("prefixd_prompt_cache_prefix_tokens_reused_total {}\n", s.tokens_reused);
  family("prefixd_prompt_cache_requests_total", "counter", "Requests by what the prompt cache did for them.");
  for (int i = 0; i < cache::kOutcomeCount; ++i) {
    out += std::format("prefixd_prompt_cache_requests_total{{outcome=\"{}\"}} {}\n",
                       cache::outcome_name(static_cast<cache::Outcome>(i)), s.outcomes[static_cast<size_t>(i)]);
  }
  family("prefixd_prompt_cache_inflight_shares_total", "counter", "Hits taken from another running request's cells.");
  out += std::format("prefixd_prompt_cache_inflight_shares_total {}\n", s.inflight_shares);
  family("prefixd_prompt_cache_evictions_total", "counter", "Cached entries or segments dropped, by reason.");
  out += std::format("prefixd_prompt_cache_evictions_total{{reason=\"lru\"}} {}\n", s.evictions_lru);
  out += std::format("prefixd_prompt_cache_evictions_total{{reason=\"ttl\"}} {}\n", s.evictions_ttl);
  out += std::format("prefixd_prompt_cache_evictions_total{{reason=\"capacity\"}} {}\n", s.evictions_capacity);
  out += std::format("prefixd_prompt_cache_evictions_total{{reason=\"device\"}} {}\n", s.device_evictions);
  family("prefixd_prompt_cache_demotions_total", "counter", "Device-tier entries moved to the host tier.");
  out += std::format("prefixd_prompt_cache_demotions_total {}\n", s.demotions);
  family("prefixd_prompt_cache_failed_restores_total", "counter", "Host segments that could not be restored.");
  out += std::format("prefixd_prompt_cache_failed_restores_total {}\n", s.failed_restores);
  family("prefixd_prompt_cache_compactions_total", "counter", "Times idle device entries were rewritten at the low end of the context.");
  out += std::format("prefixd_prompt_cache_compactions_total {}\n", s.compactions);
  family("prefixd_prompt_cache_bytes", "gauge", "Bytes of K/V held, by tier.");
  out += std::format("prefixd_prompt_cache_bytes{{tier=\"device\"}} {}\n", s.device_bytes);
  out += std::format("prefixd_prompt_cache_bytes{{tier=\"host\"}} {}\n", s.host_bytes);
  family("prefixd_prompt_cache_entries", "gauge", "Entries held, by tier (host: segments).");
  out += std::format("prefixd_prompt_cache_entries{{tier=\"device\"}} {}\n", s.device_entries);
  out += std::format("prefixd_prompt_cache_entries{{tier=\"host\"}} {}\n", s.host_entries);
  family("prefixd_prompt_cache_device_cells", "gauge", "KV cells held by device-tier entries, and of those the ones running requests use.");
  out += std::format("prefixd_prompt_cache_device_cells{{state=\"held\"}} {}\n", s.device_cells);
  out += std::format("prefixd_prompt_cache_device_cells{{state=\"locked\"}} {}\n", s.device_locked_cells);
  family("prefixd_prompt_cache_capacity_bytes", "gauge", "Host-tier byte budget.");
  out += std::format("prefixd_prompt_cache_capacity_bytes {}\n", s.host_capacity_bytes);
  family("prefixd_prompt_cache_snapshots", "gauge", "Checkpoints held (recurrent state or window cells after a prefix).");
  out += std::format("prefixd_prompt_cache_snapshots {}\n", s.checkpoints);
  family("prefixd_prompt_cache_snapshot_bytes", "gauge", "Bytes of checkpoints held.");
  out += std::format("prefixd_prompt_cache_snapshot_bytes {}\n", s.checkpoint_bytes);
  family("prefixd_prompt_cache_snapshots_saved_total", "counter", "Checkpoints taken.");
  out += std::format("prefixd_prompt_cache_snapshots_saved_total {}\n", s.checkpoints_saved);
  family("prefixd_prompt_cache_snapshot_restores_total", "counter", "Requests resumed from a checkpoint.");
  out += std::format("prefixd_prompt_cache_snapshot_restores_total {}\n", s.checkpoints_restored);
  family("prefixd_prompt_cache_snapshot_evictions_total", "counter", "Checkpoints dropped, by reason.");
  out += std::format("prefixd_prompt_cache_snapshot_evictions_total{{reason=\"lru\"}} {}\n", s.checkpoint_evictions_lru);
  out += std::format("prefixd_prompt_cache_snapshot_evictions_total{{reason=\"ttl\"}} {}\n", s.checkpoint_evictions_ttl);
  out += std::format("prefixd_prompt_cache_snapshot_evictions_total{{reason=\"capacity\"}} {}\n", s.checkpoint_evictions_capacity);
  out += std::format("prefixd_prompt_cache_snapshot_evictions_total{{reason=\"superseded\"}} {}\n", s.checkpoints_superseded);
  family("prefixd_prompt_cache_snapshot_refusals_total", "counter",
         "Requests a session's longer checkpoint could not serve, by cause.");
  out += std::format("prefixd_prompt_cache_snapshot_refusals_total{{cause=\"diverged\"}} {}\n", s.checkpoint_refusals_diverged);
  out += std::format("prefixd_prompt_cache_snapshot_refusals_total{{cause=\"evicted\"}} {}\n", s.checkpoint_refusals_evicted);
  out += std::format("prefixd_prompt_cache_snapshot_refusals_total{{cause=\"namespace\"}} {}\n", s.checkpoint_refusals_namespace);
  return out;
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
