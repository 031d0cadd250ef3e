#include "api/transport_metrics.h"

#include <cstdint>
#include <format>
#include <string_view>

namespace prefixd::api {
namespace {

void metric(std::string& out, std::string_view name, std::string_view type, std::string_view help, std::uint64_t value) {
  out += std::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
}

}  // namespace

std::string transport_metrics_text(const http::ServerStats& stats) {
  std::string out;
  metric(out, "prefixd_http_connections_open", "gauge", "Client connections open now.", stats.connections_open);
  metric(out, "prefixd_http_connections_accepted_total", "counter", "Client connections accepted.",
         stats.connections_accepted);
  metric(out, "prefixd_http_connections_evicted_total", "counter",
         "Connections waiting for a request that were closed to make room for new ones.", stats.connections_evicted);
  metric(out, "prefixd_http_connections_refused_total", "counter",
         "Connections closed at once: the connection limit was reached and none was waiting.",
         stats.connections_refused);
  metric(out, "prefixd_http_timeouts_total", "counter",
         "Connections closed because headers, a body, a keep-alive wait or a write ran past its deadline.",
         stats.timeouts);
  metric(out, "prefixd_http_requests_total", "counter", "Requests read in full.", stats.requests);
  metric(out, "prefixd_http_rejected_total", "counter",
         "Requests the transport refused itself (malformed, too large, URL or headers too long).", stats.rejected);
  metric(out, "prefixd_http_requests_in_flight", "gauge", "Requests being handled on worker threads.",
         stats.requests_in_flight);
  return out;
}

}  // namespace prefixd::api
