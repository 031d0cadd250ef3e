#include "cli/serve_http_options.h"

#include <chrono>

namespace prefixd::cli {
namespace {

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

}  // namespace

void add_http_options(CLI::App& cmd, api::ServerOptions& server, HttpFlags& flags) {
  http::ServerOptions& h = server.http;
  cmd.add_option("--host", h.host, "Address to listen on")->capture_default_str()->envname("PREFIXD_HOST");
  cmd.add_option("--port", h.port, "Port to listen on (0: any free port)")
      ->capture_default_str()->envname("PREFIXD_PORT")->check(CLI::Range(0, 65535));
  cmd.add_option("--max-body-bytes", h.max_body_bytes, "Largest request body accepted (larger: 413)")
      ->capture_default_str()->envname("PREFIXD_MAX_BODY_BYTES");
  cmd.add_option("--max-json-nodes", flags.max_json_nodes,
                 "Most JSON values a request body may hold (more: 413 before it is parsed); 0: 262144, or "
                 "--ctx-size + 65536 when larger, so a prompt of token ids that fills the context fits")
      ->capture_default_str()->envname("PREFIXD_MAX_JSON_NODES")->check(CLI::Range(std::size_t{0}, std::size_t{1} << 32));
  cmd.add_option("--http-threads", h.workers,
                 "Threads that handle requests (0: --parallel + --max-queued + the number of cores: one for each "
                 "running or queued request, which holds it until its response ends, and one per core for requests "
                 "that only compute); idle and slow connections take none")
      ->capture_default_str()->envname("PREFIXD_HTTP_THREADS")->check(CLI::Range(0, 4096));
  cmd.add_option("--http-header-timeout", flags.header_timeout_s,
                 "Seconds a new connection has to send its request line and headers")
      ->capture_default_str()->envname("PREFIXD_HTTP_HEADER_TIMEOUT")->check(CLI::Range(0.05, 3600.0));
  cmd.add_option("--http-body-timeout", flags.body_timeout_s, "Seconds a request has to send its body")
      ->capture_default_str()->envname("PREFIXD_HTTP_BODY_TIMEOUT")->check(CLI::Range(0.05, 3600.0));
  cmd.add_option("--http-keepalive-timeout", flags.keepalive_timeout_s,
                 "Seconds a kept-alive connection may wait for its next request")
      ->capture_default_str()->envname("PREFIXD_HTTP_KEEPALIVE_TIMEOUT")->check(CLI::Range(0.05, 3600.0));
  cmd.add_option("--http-write-timeout", flags.write_timeout_s,
                 "Seconds one write of a response may take (a client that stops reading is cut off)")
      ->capture_default_str()->envname("PREFIXD_HTTP_WRITE_TIMEOUT")->check(CLI::Range(0.05, 3600.0));
  cmd.add_option("--stream-keepalive", flags.stream_keepalive_s,
                 "Seconds a streamed reply may stay silent (a long prompt waiting or in prefill) before it gets "
                 "an event that clients count as activity and that adds nothing to the reply; keep it below the "
                 "shortest stream idle timeout of the clients served")
      ->capture_default_str()->envname("PREFIXD_STREAM_KEEPALIVE")->check(CLI::Range(0.1, 3600.0));
  cmd.add_option("--http-max-requests-per-connection", h.max_requests_per_connection,
                 "Requests served on one kept-alive connection before it is closed")
      ->capture_default_str()->envname("PREFIXD_HTTP_MAX_REQUESTS_PER_CONNECTION")->check(CLI::Range(1, 1 << 30));
  cmd.add_option("--http-max-connections", h.max_connections,
                 "Connections open at once (also bounded by the open-file limit); at the limit the connection "
                 "waiting longest for a request is closed to make room")
      ->capture_default_str()->envname("PREFIXD_HTTP_MAX_CONNECTIONS")->check(CLI::Range(1, 1 << 24));
  cmd.add_option("--http-max-connections-per-client", h.max_connections_per_client,
                 "Connections one client address may hold (0: no limit); beyond it that client's connection "
                 "waiting longest is closed")
      ->capture_default_str()->envname("PREFIXD_HTTP_MAX_CONNECTIONS_PER_CLIENT")->check(CLI::Range(0, 1 << 24));
  cmd.add_option("--http-max-header-bytes", h.max_header_bytes, "Largest request line plus headers (larger: 431)")
      ->capture_default_str()->envname("PREFIXD_HTTP_MAX_HEADER_BYTES")->check(CLI::Range(1024, 1 << 24));
  cmd.add_option("--http-max-url-bytes", h.max_target_bytes, "Longest request URL (longer: 414)")
      ->capture_default_str()->envname("PREFIXD_HTTP_MAX_URL_BYTES")->check(CLI::Range(64, 1 << 24));
  cmd.add_option("--shutdown-grace-seconds", flags.shutdown_grace_s,
                 "On SIGTERM or SIGINT, how long requests in flight may run before they are ended (a second "
                 "signal ends them at once)")
      ->capture_default_str()->envname("PREFIXD_SHUTDOWN_GRACE_SECONDS")->check(CLI::Range(0.0, 86400.0));
}

void apply_http_flags(const HttpFlags& flags, api::ServerOptions& server) {
  server.http.header_timeout = milliseconds(flags.header_timeout_s);
  server.http.body_timeout = milliseconds(flags.body_timeout_s);
  server.http.keepalive_timeout = milliseconds(flags.keepalive_timeout_s);
  server.http.write_timeout = milliseconds(flags.write_timeout_s);
  server.stream_keep_alive = milliseconds(flags.stream_keepalive_s);
}

}  // namespace prefixd::cli
