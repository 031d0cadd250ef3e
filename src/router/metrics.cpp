#include "router/metrics.h"

#include <format>
#include <memory>

namespace prefixd::router {

void RouterMetrics::request(const std::string& backend, const char* result) {
  std::lock_guard lock(mutex_);
  ++requests_[{backend, result}];
}

void RouterMetrics::retry() {
  std::lock_guard lock(mutex_);
  ++retries_;
}

void RouterMetrics::decision(Reason reason, std::int64_t matched_tokens, std::int64_t prompt_tokens) {
  std::lock_guard lock(mutex_);
  ++decisions_[static_cast<std::size_t>(reason)];
  matched_tokens_ += matched_tokens;
  prompt_tokens_ += prompt_tokens;
}

void RouterMetrics::stream_error(const std::string& backend) {
  std::lock_guard lock(mutex_);
  ++stream_errors_[backend];
}

void RouterMetrics::no_backend() {
  std::lock_guard lock(mutex_);
  ++no_backend_;
}

std::string RouterMetrics::text(std::span<const std::unique_ptr<Backend>> backends) const {
  std::lock_guard lock(mutex_);
  std::string out;
  out += "# HELP prefixd_router_requests_total Requests forwarded, by backend and result.\n";
  out += "# TYPE prefixd_router_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += std::format("prefixd_router_requests_total{{backend=\"{}\",result=\"{}\"}} {}\n", key.first, key.second, n);
  }
  out += "# HELP prefixd_router_retries_total Requests sent to another backend after one failed before its first byte.\n";
  out += "# TYPE prefixd_router_retries_total counter\n";
  out += std::format("prefixd_router_retries_total {}\n", retries_);
  out += "# HELP prefixd_router_unroutable_total Requests answered 503: no healthy backend was left.\n";
  out += "# TYPE prefixd_router_unroutable_total counter\n";
  out += std::format("prefixd_router_unroutable_total {}\n", no_backend_);
  out += "# HELP prefixd_router_stream_errors_total Streams ended with an error event after an upstream failure.\n";
  out += "# TYPE prefixd_router_stream_errors_total counter\n";
  for (const auto& [backend, n] : stream_errors_) {
    out += std::format("prefixd_router_stream_errors_total{{backend=\"{}\"}} {}\n", backend, n);
  }
  out += "# HELP prefixd_router_decisions_total Routing decisions, by reason.\n";
  out += "# TYPE prefixd_router_decisions_total counter\n";
  for (int r = 0; r < kReasonCount; ++r) {
    out += std::format("prefixd_router_decisions_total{{reason=\"{}\"}} {}\n", reason_name(static_cast<Reason>(r)),
                       decisions_[static_cast<std::size_t>(r)]);
  }
  out += "# HELP prefixd_router_matched_tokens_total Prompt tokens the chosen backend was known to hold.\n";
  out += "# TYPE prefixd_router_matched_tokens_total counter\n";
  out += std::format("prefixd_router_matched_tokens_total {}\n", matched_tokens_);
  out += "# HELP prefixd_router_prompt_tokens_total Prompt tokens of the requests routed by prefix.\n";
  out += "# TYPE prefixd_router_prompt_tokens_total counter\n";
  out += std::format("prefixd_router_prompt_tokens_total {}\n", prompt_tokens_);
  out += "# HELP prefixd_router_backend_healthy 1 while the backend passes its health checks.\n";
  out += "# TYPE prefixd_router_backend_healthy gauge\n";
  for (const auto& b : backends) out += std::format("prefixd_router_backend_healthy{{backend=\"{}\"}} {}\n", b->url(), b->healthy() ? 1 : 0);
  out += "# HELP prefixd_router_backend_in_flight Requests the router has running on the backend.\n";
  out += "# TYPE prefixd_router_backend_in_flight gauge\n";
  for (const auto& b : backends) out += std::format("prefixd_router_backend_in_flight{{backend=\"{}\"}} {}\n", b->url(), b->in_flight());
  out += "# HELP prefixd_router_backend_summary_blocks Block hashes the router knows the backend holds.\n";
  out += "# TYPE prefixd_router_backend_summary_blocks gauge\n";
  for (const auto& b : backends) out += std::format("prefixd_router_backend_summary_blocks{{backend=\"{}\"}} {}\n", b->url(), b->block_count());
  return out;
}

}  // namespace prefixd::router
