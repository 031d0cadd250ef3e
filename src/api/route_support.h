// prefixd api — what every route handler answers with over the HTTP transport (src/http): JSON
// bodies and errors in OpenAI's shape, event streams, the caller of a request and why a request
// in flight must stop. The router (http_server.cpp) and the handlers beside it share these, so
// that a body, an error or a stream reads the same whichever handler wrote it.
#pragma once

#include <expected>
#include <memory>
#include <optional>
#include <string>

#include "api/auth/access.h"
#include "api/auth/tenants.h"
#include "api/errors.h"
#include "api/openai/request_parser.h"
#include "api/stream_relay.h"
#include "http/server.h"

namespace prefixd::api {

inline constexpr const char* kJson = "application/json";

http::Response json_response(int status, std::string body);
http::Response error_response(const ApiError& error);

// A server-sent event stream that `relay` writes. Runs on the request's worker after the head is
// sent; a relay that never runs (the head could not be written) cancels its request when the
// response is dropped.
http::Response event_stream(std::shared_ptr<SseRelay> relay);

// Parsers copy what they keep, so a large body need not live on beside its parsed form.
std::string release_body(http::Request& req);

// Why a request in flight must stop now, as the error it ends with; none while it may go on.
std::optional<ApiError> stop_reason(const http::Request& req);

// What handlers read of the server besides their own component: how bodies parse and who calls.
struct RouteContext {
  const ParseOptions& parse;
  const KeyStore* keys;  // null: no auth

  // The caller of a request (access.h).
  std::expected<Caller, ApiError> caller(const http::Request& req) const;
  // The tenant a cache view covers (access.h, view_tenant); nullopt: every tenant.
  std::expected<std::optional<std::string>, ApiError> viewed_tenant(const http::Request& req) const;
};

}  // namespace prefixd::api
