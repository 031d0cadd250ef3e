#include "api/route_support.h"

#include <utility>

#include "api/output.h"

namespace prefixd::api {

http::Response json_response(int status, std::string body) {
  return http::Response{.status = status, .content_type = kJson, .body = std::move(body)};
}

http::Response error_response(const ApiError& error) { return json_response(error.status, dump_json(error.to_json())); }

http::Response event_stream(std::shared_ptr<SseRelay> relay) {
  http::Response res{.status = 200, .content_type = "text/event-stream"};
  res.headers.push_back({"Cache-Control", "no-cache"});
  res.stream = [relay = std::move(relay)](http::ChunkWriter& out) {
    const auto write = [&out](std::string_view frame) { return out.write(frame); };
    bool probed = false;
    while (relay->pump(write) == SseRelay::Step::more) {
      if (!probed && out.input_ended()) {
        probed = true;
        relay->keep_alive_now();
      }
    }
  };
  return res;
}

std::string release_body(http::Request& req) { return std::exchange(req.body, {}); }

std::optional<ApiError> stop_reason(const http::Request& req) {
  switch (req.cancelled()) {
    case http::CancelReason::none: return std::nullopt;
    case http::CancelReason::shutdown: return server_shutting_down();
    case http::CancelReason::client_gone: return server_busy("the request was cancelled: the client went away");
  }
  return std::nullopt;
}

std::expected<Caller, ApiError> RouteContext::caller(const http::Request& req) const {
  return identify(keys, std::string(req.header("Authorization")), std::string(req.header("X-Api-Key")));
}

std::expected<std::optional<std::string>, ApiError> RouteContext::viewed_tenant(const http::Request& req) const {
  return caller(req).and_then([&](const Caller& c) { return view_tenant(c, req.query_param("tenant")); });
}

}  // namespace prefixd::api
