#include "router/metrics.h"

#include "metrics/registry.h"

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
  const auto n = [](auto value) { return static_cast<double>(value); };
  metrics::Registry r;
  constexpr std::string_view kRequests = "prefixd_router_requests_total";
  constexpr std::string_view kRequestsHelp = "Requests forwarded, by backend and result.";
  r.declare(kRequests, metrics::Type::counter, kRequestsHelp);
  for (const auto& [key, count] : requests_) {
    r.counter(kRequests, kRequestsHelp, n(count), {{"backend", key.first}, {"result", key.second}});
  }
  r.counter("prefixd_router_retries_total", "Requests sent to another backend after one failed before its first byte.",
            n(retries_));
  r.counter("prefixd_router_unroutable_total", "Requests answered 503: no healthy backend was left.", n(no_backend_));
  constexpr std::string_view kStreamErrors = "prefixd_router_stream_errors_total";
  constexpr std::string_view kStreamErrorsHelp = "Streams ended with an error event after an upstream failure.";
  r.declare(kStreamErrors, metrics::Type::counter, kStreamErrorsHelp);
  for (const auto& [backend, count] : stream_errors_) r.counter(kStreamErrors, kStreamErrorsHelp, n(count), {{"backend", backend}});
  for (int reason = 0; reason < kReasonCount; ++reason) {
    r.counter("prefixd_router_decisions_total", "Routing decisions, by reason.",
              n(decisions_[static_cast<std::size_t>(reason)]), {{"reason", reason_name(static_cast<Reason>(reason))}});
  }
  r.counter("prefixd_router_matched_tokens_total", "Prompt tokens the chosen backend was known to hold.",
            n(matched_tokens_));
  r.counter("prefixd_router_prompt_tokens_total", "Prompt tokens of the requests routed by prefix.", n(prompt_tokens_));
  for (const auto& b : backends) {
    r.gauge("prefixd_router_backend_healthy", "1 while the backend passes its health checks.", b->healthy() ? 1 : 0,
            {{"backend", b->url()}});
  }
  for (const auto& b : backends) {
    r.gauge("prefixd_router_backend_in_flight", "Requests the router has running on the backend.", n(b->in_flight()),
            {{"backend", b->url()}});
  }
  for (const auto& b : backends) {
    r.gauge("prefixd_router_backend_summary_blocks", "Block hashes the router knows the backend holds.",
            n(b->block_count()), {{"backend", b->url()}});
  }
  return r.text();
}

}  // namespace prefixd::router
