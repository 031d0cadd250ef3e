// prefixd api — the prompt cache's state as the API shows it: /v1/cache/stats JSON and the
// cache part of /metrics; and the time-to-first-token histogram.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cache/prefix_cache.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

// `model`: the family and how its memory is reused are part of the answer.
nlohmann::ordered_json cache_stats_json(const cache::CacheStats& stats, const engine::ModelInfo& model);
nlohmann::ordered_json cache_reset_json(const cache::ResetReport& report);
// Prometheus text for the prompt cache (prefixd_prompt_cache_*).
std::string cache_metrics_text(const cache::CacheStats& stats);

// Prometheus histogram text of the scheduler's time-to-first-token buckets.
std::string ttft_metrics_text(const scheduler::SchedulerStats& stats);

}  // namespace prefixd::api
