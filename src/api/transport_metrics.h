// prefixd api — the HTTP transport's counters as /metrics families (prefixd_http_*).
#pragma once

#include "http/server.h"
#include "metrics/registry.h"

namespace prefixd::api {

void add_transport_metrics(metrics::Registry& registry, const http::ServerStats& stats);

}  // namespace prefixd::api
