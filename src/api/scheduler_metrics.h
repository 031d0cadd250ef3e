// prefixd api — the scheduler's families in /metrics: requests, tokens, images, drafts, time to
// first token (overall and by cache outcome), where the scheduler thread's time goes, and the
// prefill seconds the prefix cache saved (its hit tokens are the cache's families:
// add_cache_metrics in control/cache_report.h).
#pragma once

#include "metrics/registry.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

void add_scheduler_metrics(metrics::Registry& registry, const scheduler::SchedulerStats& stats);

}  // namespace prefixd::api
