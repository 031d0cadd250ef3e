// prefixd http — an event-driven HTTP/1.1 server (Boost.Asio and Beast).
//
// Owns: sockets, parsing, keep-alive and pipelining, timeouts, connection limits, streaming
// bodies, draining on shutdown. Knows nothing of the API: it hands whole requests to Handlers.
//
// One I/O thread reads and writes every connection, so idle and slow connections cost a few
// hundred bytes each and no thread. A request is handled on a worker thread (handlers may block
// for the length of a generation) unless Handlers::is_quick says it can be answered at once on
// the I/O thread, which keeps health checks answering while every worker is busy.
//
// Invariants:
// - Requests on one connection are answered in order: the next request is read only after the
//   previous response is written (pipelined bytes wait in the connection's buffer).
// - Every connection waiting for a request (idle keep-alive or headers still arriving) has a
//   deadline, and may be closed to make room when the server or its client address is at its
//   connection limit: the oldest waiting connection goes first. Connections with a request in
//   flight are never evicted.
// - Draining, a connection closes without an answer only when nothing of a next request has
//   arrived on it, or when the grace ends while one is still arriving: every request begun before
//   its connection's last answer is answered.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "http/message.h"

namespace prefixd::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                           // 0: any free port
  int workers = 8;                           // threads that run handlers
  std::size_t max_body_bytes = 8u << 20;     // larger bodies: 413
  std::size_t max_header_bytes = 64u << 10;  // request line and headers; more: 431 (or 414)
  std::size_t max_target_bytes = 16u << 10;  // request target (URL); longer: 414
  std::chrono::milliseconds header_timeout{10'000};     // a new connection's request line and headers
  std::chrono::milliseconds body_timeout{60'000};       // a request's body, once its headers are in
  std::chrono::milliseconds keepalive_timeout{30'000};  // between requests on a kept-alive connection
  std::chrono::milliseconds write_timeout{60'000};      // each write of a response
  std::size_t max_requests_per_connection = 1000;
  std::size_t max_connections = 8192;             // open at once; also bounded by the file limit
  std::size_t max_connections_per_client = 1024;  // per client address; 0: no limit
};

struct Handlers {
  // Answers one request. Runs on a worker thread unless is_quick(request). Exceptions are turned
  // into error(500, ...).
  std::function<Response(Request&)> handle;
  // True for requests that are answered at once without blocking (health checks).
  std::function<bool(const Request&)> is_quick;
  // The body for errors the transport answers itself (400, 408, 413, 414, 431, 503).
  std::function<Response(int status, std::string_view message, std::string_view code)> error;
  // Optional, called on the worker thread with the size of the body the request came with: before
  // `handle`, and once its response has been handed to its connection (a stream: after its last
  // chunk). Every call of `began` is followed by one of `finished`.
  std::function<void(std::size_t body_bytes)> began;
  std::function<void(std::size_t body_bytes)> finished;
};

// Counters since start; connection gauges are current values.
struct ServerStats {
  std::uint64_t connections_open = 0;
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_evicted = 0;   // waiting connections closed to make room
  std::uint64_t connections_refused = 0;   // closed at accept: limit reached, nothing to evict
  std::uint64_t timeouts = 0;              // header, body, keep-alive or write deadlines
  std::uint64_t requests = 0;              // handed to a handler
  std::uint64_t rejected = 0;              // answered by the transport with a 4xx
  std::uint64_t requests_in_flight = 0;
};

class Connection;  // server_impl.h

class Server {
 public:
  Server(ServerOptions options, Handlers handlers);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens; false (with a logged reason) if that fails.
  bool listen();
  // Serves on the calling thread until shutdown() has finished draining.
  void run();
  // Stops accepting and closes the connections waiting for a request of which nothing has arrived.
  // A request that arrives on an open connection afterwards (begun before, or pipelined behind one
  // in flight) is read and answered 503 `server_shutting_down`. Requests in flight may finish for
  // up to `grace`; then they are cancelled (Request::cancelled() turns to shutdown) and
  // connections still receiving a request close. Returns from run() once every connection is
  // closed. Thread-safe; later calls may shorten the grace.
  void shutdown(std::chrono::milliseconds grace);
  int bound_port() const;
  ServerStats stats() const;

 private:
  friend class Connection;
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Raises the soft limit on open files to the hard limit (connections are files); returns the
// limit now in effect.
std::size_t raise_open_file_limit();

}  // namespace prefixd::http
