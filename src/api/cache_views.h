// prefixd api — the prompt cache seen over HTTP: GET /v1/cache/stats (control/cache_scope_report.h),
// POST /v1/cache/reset, and what a prefix-aware router and the web UI read: GET /v1/cache/summary
// and POST /v1/cache/chain (routing/cache_routing.h), GET /v1/cache/tree
// (control/cache_tree_report.h). Each is scoped to what its caller may see (auth/access.h). The
// control plane's operations under /v1/cache/ are control/'s.
#pragma once

#include <cstdint>
#include <string>

#include "api/chat/chat_service.h"
#include "api/control/cache_control.h"
#include "api/route_support.h"
#include "api/routing/cache_routing.h"
#include "cache/disk_format.h"
#include "engine/engine.h"
#include "http/server.h"
#include "scheduler/scheduler.h"

namespace prefixd::api {

class CacheViews {
 public:
  // Every reference must outlive the views. `slots`: the requests decoded at once, which the
  // summary reports.
  CacheViews(const engine::Engine& engine, scheduler::Scheduler& scheduler, const CacheControl& control,
             const ChatService& chats, const RouteContext& route, std::int32_t slots, KvEventsAdvert kv_events);

  http::Response stats(const http::Request& req) const;  // GET /v1/cache/stats
  http::Response reset(const http::Request& req);         // POST /v1/cache/reset
  // GET /v1/cache/summary: scoped like /metrics, it names every tenant's prefixes.
  http::Response summary(const http::Request& req);
  // GET /v1/cache/tree: scoped like /v1/cache/stats; `limit` bounds the nodes.
  http::Response tree(const http::Request& req);
  // POST /v1/cache/chain: the request's prompt and cache key built exactly as the chat service
  // builds them for this caller, hashed on the engine thread; nothing is queued or kept.
  http::Response chain(const http::Request& req);

 private:
  // The tenant a reset covers: `?tenant=ID` or `{"tenant": ID}` in the body (the same one when
  // both are given), else the caller's own (an admin's: every tenant). A body field the reset
  // does not know is refused rather than ignored: the client meant something by it.
  std::expected<std::optional<std::string>, ApiError> reset_tenant(const http::Request& req) const;

  const engine::Engine& engine_;
  scheduler::Scheduler& scheduler_;
  const CacheControl& control_;
  const ChatService& chats_;
  const RouteContext& route_;
  std::int32_t slots_;
  const std::string server_id_;    // GET /v1/cache/summary
  const KvEventsAdvert kv_events_;
  const cache::Digest model_key_;  // POST /v1/cache/chain
};

}  // namespace prefixd::api
