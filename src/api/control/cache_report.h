// prefixd api — the prompt cache's state as the API shows it: /v1/cache/stats JSON and the
// cache part of /metrics.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cache/cache_types.h"
#include "metrics/registry.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

// `model`: the family and how its memory is reused are part of the answer.
nlohmann::ordered_json cache_stats_json(const cache::CacheStats& stats, const engine::ModelInfo& model);
nlohmann::ordered_json cache_reset_json(const cache::ResetReport& report);
// The prompt cache's families (prefixd_prompt_cache_*, prefixd_cache_remote_*), and the field's
// prefixd_prefix_cache_queries_total (prompt tokens looked up; its _hits_total is the scheduler's).
void add_cache_metrics(metrics::Registry& registry, const cache::CacheStats& stats);
// Where the model runs (prefixd_gpu_*): the GPU devices' memory, the layers offloaded there, the
// context's K/V and the device tier's share of it in GPU memory.
void add_compute_metrics(metrics::Registry& registry, const cache::CacheStats& stats, const engine::ModelInfo& model);

}  // namespace prefixd::api
