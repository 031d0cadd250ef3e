// prefixd http — internals shared by the listener (server.cpp) and connections (connection.cpp).
// Everything here runs on the one I/O thread unless a comment says otherwise.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "http/server.h"
#include "http/worker_pool.h"

namespace prefixd::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

class Connection;

// Handlers posted to io_ capture `this`: the io_context is a member, so none can run after the
// Impl is gone (destroying io_ destroys them uninvoked).
class Server::Impl {
 public:
  Impl(ServerOptions options, Handlers handlers);

  bool listen();
  void run();
  void shutdown(std::chrono::milliseconds grace);  // any thread
  int bound_port() const { return port_.load(); }
  ServerStats stats() const;

  // For connections.
  const ServerOptions& options() const { return options_; }
  const Handlers& handlers() const { return handlers_; }
  net::io_context& io() { return io_; }
  WorkerPool& workers() { return *workers_; }
  bool draining() const { return draining_; }
  void waiting(Connection& connection);      // now waiting for a request: evictable
  void not_waiting(Connection& connection);
  void closed(Connection& connection);        // unregisters; the last one ends a drain
  void request_started(Connection& connection);
  void request_finished(Connection& connection);

  struct Counters {
    std::atomic<std::uint64_t> accepted{0}, evicted{0}, refused{0}, timeouts{0}, requests{0}, rejected{0};
  };
  Counters counters;

 private:
  void accept();
  void on_accept(const beast::error_code& ec, tcp::socket socket);
  bool admit(const std::string& client);
  bool evict_waiting(const std::string* client);
  void begin_drain(std::chrono::steady_clock::time_point deadline);
  void end_grace();
  void finish_if_drained();

  ServerOptions options_;
  Handlers handlers_;
  net::io_context io_{1};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> keep_running_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_accept_;
  net::steady_timer drain_timer_;
  std::atomic<int> port_{0};
  bool draining_ = false;
  std::chrono::steady_clock::time_point drain_deadline_ = std::chrono::steady_clock::time_point::max();

  // Every open connection (holding it alive), the waiting ones oldest first, and how many each
  // client address has open.
  std::unordered_map<Connection*, std::shared_ptr<Connection>> connections_;
  std::list<Connection*> waiting_;
  std::unordered_map<std::string, std::size_t> per_client_;
  std::atomic<std::uint64_t> open_{0}, in_flight_count_{0};

  std::unique_ptr<WorkerPool> workers_;  // last: joined first
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::Impl& server, tcp::socket socket, std::string client);

  void start();
  void close();  // idempotent; never while a worker handles this connection's request
  const std::string& client() const { return client_; }
  // The drain began while this connection waited for a request: it closes unless some bytes of
  // one have arrived, in which case that request is read and answered 503.
  void drain();
  // The drain's grace is over: a request in flight is cancelled (CancelReason::shutdown) and a
  // request still arriving will not be answered, so its connection closes.
  void grace_over();

  std::list<Connection*>::iterator waiting_position;  // valid while waiting
  bool is_waiting = false;

 private:
  void read_request();
  void on_header(const beast::error_code& ec);
  void read_body();
  void on_body(const beast::error_code& ec);
  void dispatch();
  void handle_on_worker(Request request, bool keep_alive);
  void respond(Response response, bool keep_alive);
  void reject(int status, std::string_view message, std::string_view code);
  void reject_too_large();
  void after_response(bool keep_alive);
  // A request in flight should stop: its client went away, or the drain's grace is over.
  void cancel(CancelReason reason);
  // Some bytes of a next request have arrived: parsed, in the buffer, or in the socket.
  bool request_begun();
  void linger_then_close();
  void discard_input();
  void watch_peer();
  void probe_after_end_of_input();
  void check_for_reset(int attempt);
  // Worker thread: writes `bytes` and waits for the write to finish; false if it failed.
  bool write_blocking(std::string bytes);
  bool request_line_too_long() const;

  Server::Impl& server_;
  beast::tcp_stream stream_;
  net::steady_timer probe_timer_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;  // engaged while a request arrives
  std::string client_;
  unsigned version_ = 11;
  bool head_request_ = false;  // the request being answered is a HEAD: its answer has no body
  std::size_t served_ = 0;
  bool closed_ = false;
  bool in_flight_ = false;
  bool response_started_ = false;  // some byte of the current response was written or queued
  // The client ended its input while a streamed response ran (read by the streamer's thread), and
  // the next write is to be followed by a look for the peer's reset (I/O thread).
  std::atomic<bool> input_ended_{false};
  bool probe_on_write_ = false;
  std::atomic<bool> write_failed_{false};
  std::shared_ptr<std::atomic<int>> cancel_ = std::make_shared<std::atomic<int>>(0);
  std::array<char, 4096> discard_{};
};

}  // namespace prefixd::http
