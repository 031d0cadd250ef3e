// prefixd api — the one table of the server's routes. Each row names a method, a path and the
// handler that answers it; the same rows decide which handler runs, the 405 (with Allow) for a
// path asked with a method no row has, the 404 for a path no row has, and the shape of every
// refusal (OpenAI's, or Anthropic's under /v1/messages). Adding an endpoint is adding a row.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/errors.h"
#include "http/server.h"

namespace prefixd::api {

// The error body a route's refusals take: OpenAI's {"error": {...}} or Anthropic's
// {"type": "error", "error": {...}} (anthropic_messages.h).
enum class ErrorShape { openai, anthropic };

// How a row's path matches a request's.
enum class PathMatch {
  exact,   // the path itself
  prefix,  // the path (ending in '/') and a non-empty rest, which the handler gets as `tail`
  chosen,  // the paths `accepts` takes (the web UI's files); `path` only names the row
};

// What a row's handler gets: the request, and the rest of the path after a prefix row's path.
using RouteHandler = std::function<http::Response(http::Request& req, std::string_view tail)>;

struct RouteRow {
  std::string method;  // GET, POST or DELETE
  std::string path;
  RouteHandler handler;
  PathMatch match = PathMatch::exact;
  std::function<bool(std::string_view path)> accepts;  // PathMatch::chosen only
  // A GET that has no effect and never streams also answers HEAD (the transport drops the body).
  bool head = false;
};

class RouteTable {
 public:
  // Refusals under these path prefixes take this shape; every other path OpenAI's.
  void shape_errors(std::string path_prefix, ErrorShape shape);
  void add(RouteRow row);

  // The answer of the row for the request's method and path; 405 with Allow when rows have the
  // path under other methods; 404 when none has it.
  http::Response dispatch(http::Request& req) const;

  // The shape refusals on `path` take, for answers made outside a row (an unknown key, an
  // exception escaping a handler).
  ErrorShape shape_of(std::string_view path) const;
  // An error in the shape of `path`.
  http::Response refuse(std::string_view path, const ApiError& error) const;

  std::span<const RouteRow> rows() const { return rows_; }

 private:
  struct ShapedPrefix {
    std::string prefix;
    ErrorShape shape;
  };
  std::vector<RouteRow> rows_;
  std::vector<ShapedPrefix> shapes_;
};

}  // namespace prefixd::api
