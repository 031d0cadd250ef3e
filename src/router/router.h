// prefixd router — `prefixd route`: an OpenAI-compatible HTTP front that sends each request to the
// prefixd backend already holding most of its prompt's prefix.
//
// Owns: the front (the project's HTTP transport), the backends' health and cache summaries (one
// poller thread), the routing decision (policy.h), forwarding with one retry per backend before
// the first byte reaches the client, and its own metrics. Must not know: how a backend tokenizes
// or caches — it asks the backend (POST /v1/cache/chain, GET /v1/cache/summary) and compares
// opaque block hashes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http/server.h"
#include "router/policy.h"

namespace prefixd::router {

struct RouterOptions {
  std::vector<std::string> backends;               // http://HOST:PORT each
  http::ServerOptions http;                        // where the front listens
  Policy policy = Policy::prefix;
  std::chrono::milliseconds health_interval{500};
  std::chrono::milliseconds summary_interval{500};
  double load_weight = 64;                         // tokens of matched prefix one queued or running request is worth
  std::string backend_api_key;                     // sent on the router's own calls (summaries need an admin key)
  bool kv_events = true;                           // follow the backends' KV events where they publish them
};

class Router {
 public:
  // Throws std::invalid_argument for a bad backend URL or no backend.
  explicit Router(RouterOptions options);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Binds and serves until shutdown(); false (logged) when binding fails.
  bool run();
  // Thread-safe: stops polling, lets requests in flight finish for up to `grace`.
  void shutdown(std::chrono::milliseconds grace);
  int bound_port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixd::router
