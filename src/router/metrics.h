// prefixd router — the router's own counters, rendered in Prometheus text format on its /metrics.
// Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "router/backend.h"
#include "router/policy.h"

namespace prefixd::router {

class RouterMetrics {
 public:
  // `result`: ok (2xx-4xx relayed), error (refused, reset or 5xx: retried elsewhere when possible).
  void request(const std::string& backend, const char* result);
  void retry();
  void decision(Reason reason, std::int64_t matched_tokens, std::int64_t prompt_tokens);
  void stream_error(const std::string& backend);
  void no_backend();

  std::string text(std::span<const std::unique_ptr<Backend>> backends) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::int64_t> requests_;
  std::map<std::string, std::int64_t> stream_errors_;
  std::int64_t retries_ = 0;
  std::int64_t no_backend_ = 0;
  std::array<std::int64_t, kReasonCount> decisions_{};
  std::int64_t matched_tokens_ = 0;
  std::int64_t prompt_tokens_ = 0;
};

}  // namespace prefixd::router
