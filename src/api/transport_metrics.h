// prefixd api — the HTTP transport's counters in Prometheus text form.
#pragma once

#include <string>

#include "http/server.h"

namespace prefixd::api {

std::string transport_metrics_text(const http::ServerStats& stats);

}  // namespace prefixd::api
