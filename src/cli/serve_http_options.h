// `prefixd serve`: the HTTP transport's flags (address, workers, limits, timeouts, shutdown).
#pragma once

#include <cstddef>

#include <CLI/CLI.hpp>

#include "api/server.h"

namespace prefixd::cli {

struct HttpFlags {
  double header_timeout_s = 10;
  double body_timeout_s = 60;
  double keepalive_timeout_s = 30;
  double write_timeout_s = 60;
  double stream_keepalive_s = 15;
  double shutdown_grace_s = 30;
  std::size_t max_json_nodes = 0;  // 0: api::json_node_limit_for_context(--ctx-size)
};

void add_http_options(CLI::App& cmd, api::ServerOptions& server, HttpFlags& flags);
// Copies the parsed seconds into `server.http`.
void apply_http_flags(const HttpFlags& flags, api::ServerOptions& server);

}  // namespace prefixd::cli
