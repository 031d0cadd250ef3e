#include "api/route_table.h"

#include <algorithm>
#include <format>
#include <optional>
#include <utility>

#include "api/anthropic/anthropic_messages.h"
#include "api/output.h"
#include "api/route_support.h"

namespace prefixd::api {
namespace {

// Whether `path` is `prefix` itself or lies under it ("/v1/messages" covers "/v1/messages/x", not
// "/v1/messagesx").
bool under(std::string_view path, std::string_view prefix) {
  if (!path.starts_with(prefix)) return false;
  return path.size() == prefix.size() || prefix.ends_with('/') || path[prefix.size()] == '/';
}

// The rest of the path a row matches, or nullopt when it does not match.
std::optional<std::string_view> matched(const RouteRow& row, std::string_view path) {
  switch (row.match) {
    case PathMatch::exact:
      if (path == row.path) return std::string_view();
      return std::nullopt;
    case PathMatch::prefix:
      if (path.size() > row.path.size() && path.starts_with(row.path)) return path.substr(row.path.size());
      return std::nullopt;
    case PathMatch::chosen:
      if (row.accepts && row.accepts(path)) return std::string_view();
      return std::nullopt;
  }
  return std::nullopt;
}

bool answers(const RouteRow& row, std::string_view method) {
  return row.method == method || (method == "HEAD" && row.head && row.method == "GET");
}

}  // namespace

void RouteTable::shape_errors(std::string path_prefix, ErrorShape shape) {
  shapes_.push_back({.prefix = std::move(path_prefix), .shape = shape});
}

void RouteTable::add(RouteRow row) { rows_.push_back(std::move(row)); }

http::Response RouteTable::dispatch(http::Request& req) const {
  std::vector<std::string> allowed;
  for (const RouteRow& row : rows_) {
    const auto tail = matched(row, req.path);
    if (!tail) continue;
    if (answers(row, req.method)) return row.handler(req, *tail);
    if (std::ranges::find(allowed, row.method) == allowed.end()) allowed.push_back(row.method);
    if (row.head && std::ranges::find(allowed, "HEAD") == allowed.end()) allowed.emplace_back("HEAD");
  }
  if (allowed.empty()) {
    return refuse(req.path, ApiError{.status = 404, .message = std::format("no route for {} {}", req.method, req.path),
                                     .code = "not_found"});
  }
  std::string allow;
  for (const auto& method : allowed) allow += (allow.empty() ? "" : ", ") + method;
  http::Response res = refuse(req.path, ApiError{.status = 405,
                                                 .message = std::format("{} is not allowed on {}; use {}", req.method, req.path, allow),
                                                 .code = "method_not_allowed"});
  res.headers.push_back({"Allow", allow});
  return res;
}

ErrorShape RouteTable::shape_of(std::string_view path) const {
  for (const auto& shaped : shapes_) {
    if (under(path, shaped.prefix)) return shaped.shape;
  }
  return ErrorShape::openai;
}

http::Response RouteTable::refuse(std::string_view path, const ApiError& error) const {
  if (shape_of(path) == ErrorShape::anthropic) return json_response(error.status, dump_json(anthropic_error_json(error)));
  return error_response(error);
}

}  // namespace prefixd::api
