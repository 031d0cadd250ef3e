// prefixd router — one thread that keeps the router's view of its backends current: GET /health
// every health interval (a failure or a connection error drains the backend until a check passes)
// and, for the prefix policy, GET /v1/cache/summary?since=V every summary interval. With KV events
// on, a backend whose summary advertises a stream the router can reach is followed by the KV event
// subscriber instead (its blocks come from events; its summaries, ?blocks=false, bring only its
// load), and a restart or a gap the replay cannot fill is handled here.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "events/kv_event_subscriber.h"
#include "router/backend.h"

namespace prefixd::router {

struct PollerOptions {
  std::chrono::milliseconds health_interval{500};
  std::chrono::milliseconds summary_interval{500};  // zero: no summaries
  std::string api_key;                               // Authorization: Bearer KEY on every poll
  bool kv_events = true;                             // follow backends' KV events where advertised
};

class BackendPoller {
 public:
  // Polls each backend once before returning (so the router starts knowing who is up), then
  // keeps polling on its own thread until destroyed.
  BackendPoller(std::span<const std::unique_ptr<Backend>> backends, PollerOptions options);
  ~BackendPoller();
  BackendPoller(const BackendPoller&) = delete;
  BackendPoller& operator=(const BackendPoller&) = delete;

  void stop();

 private:
  void poll_health(Backend& backend) const;
  void poll_summary(std::size_t index);
  void loop(const std::stop_token& stop);

  std::span<const std::unique_ptr<Backend>> backends_;
  PollerOptions options_;
  std::unique_ptr<events::KvEventSubscriber> subscriber_;  // null without KV events
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::jthread thread_;  // last
};

}  // namespace prefixd::router
