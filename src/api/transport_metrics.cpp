#include "api/transport_metrics.h"

namespace prefixd::api {

void add_transport_metrics(metrics::Registry& r, const http::ServerStats& stats) {
  const auto n = [](std::uint64_t value) { return static_cast<double>(value); };
  r.gauge("prefixd_http_connections_open", "Client connections open now.", n(stats.connections_open));
  r.counter("prefixd_http_connections_accepted_total", "Client connections accepted.", n(stats.connections_accepted));
  r.counter("prefixd_http_connections_evicted_total",
            "Connections waiting for a request that were closed to make room for new ones.", n(stats.connections_evicted));
  r.counter("prefixd_http_connections_refused_total",
            "Connections closed at once: the connection limit was reached and none was waiting.",
            n(stats.connections_refused));
  r.counter("prefixd_http_timeouts_total",
            "Connections closed because headers, a body, a keep-alive wait or a write ran past its deadline.",
            n(stats.timeouts));
  r.counter("prefixd_http_requests_total", "Requests read in full.", n(stats.requests));
  r.counter("prefixd_http_rejected_total",
            "Requests the transport refused itself (malformed, too large, URL or headers too long).", n(stats.rejected));
  r.gauge("prefixd_http_requests_in_flight", "Requests being handled on worker threads.", n(stats.requests_in_flight));
}

}  // namespace prefixd::api
