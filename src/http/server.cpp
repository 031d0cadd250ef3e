// The listener: accepting, connection limits and eviction, draining on shutdown.
#include <sys/resource.h>

#include <algorithm>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "http/server_impl.h"

namespace prefixd::http {

Server::Impl::Impl(ServerOptions options, Handlers handlers)
    : options_(std::move(options)),
      handlers_(std::move(handlers)),
      keep_running_(net::make_work_guard(io_)),
      acceptor_(io_),
      retry_accept_(io_),
      drain_timer_(io_),
      workers_(std::make_unique<WorkerPool>(options_.workers)) {}

bool Server::Impl::listen() {
  beast::error_code ec;
  const auto address = net::ip::make_address(options_.host, ec);
  if (ec) {
    spdlog::error("cannot listen on {}: not an IP address", options_.host);
    return false;
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    spdlog::error("cannot listen on {}:{}: {}", options_.host, options_.port, ec.message());
    return false;
  }
  port_ = acceptor_.local_endpoint().port();
  net::post(io_, [this] { accept(); });
  return true;
}

void Server::Impl::run() {
  io_.run();
  workers_.reset();  // every connection is closed: no task is left but ones that never started
}

void Server::Impl::shutdown(std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  net::post(io_, [this, deadline] { begin_drain(deadline); });
}

ServerStats Server::Impl::stats() const {
  return ServerStats{.connections_open = open_.load(),
                     .connections_accepted = counters.accepted.load(),
                     .connections_evicted = counters.evicted.load(),
                     .connections_refused = counters.refused.load(),
                     .timeouts = counters.timeouts.load(),
                     .requests = counters.requests.load(),
                     .rejected = counters.rejected.load(),
                     .requests_in_flight = in_flight_count_.load()};
}

void Server::Impl::accept() {
  if (draining_ || !acceptor_.is_open()) return;
  acceptor_.async_accept([this](const beast::error_code& ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void Server::Impl::on_accept(const beast::error_code& ec, tcp::socket socket) {
  if (draining_ || !acceptor_.is_open()) return;
  if (ec) {
    // Out of file descriptors: make room by closing the oldest waiting connection, and try again
    // shortly instead of spinning on the same error.
    if (ec == net::error::no_descriptors || ec == net::error::no_buffer_space) evict_waiting(nullptr);
    retry_accept_.expires_after(std::chrono::milliseconds(20));
    retry_accept_.async_wait([this](const beast::error_code& wait_ec) {
      if (!wait_ec) accept();
    });
    return;
  }
  beast::error_code peer_ec;
  const auto peer = socket.remote_endpoint(peer_ec);
  std::string client = peer_ec ? std::string("unknown") : peer.address().to_string();
  if (!admit(client)) {
    counters.refused += 1;
    beast::error_code ignored;
    socket.close(ignored);
  } else {
    counters.accepted += 1;
    auto connection = std::make_shared<Connection>(*this, std::move(socket), client);
    connections_.emplace(connection.get(), connection);
    per_client_[client] += 1;
    open_ = connections_.size();
    connection->start();
  }
  accept();
}

// A new connection gets in if there is room, or if room can be made by closing a connection
// that is only waiting (the oldest: it has had the longest chance).
bool Server::Impl::admit(const std::string& client) {
  if (connections_.size() >= options_.max_connections && !evict_waiting(nullptr)) return false;
  if (options_.max_connections_per_client > 0) {
    const auto it = per_client_.find(client);
    if (it != per_client_.end() && it->second >= options_.max_connections_per_client && !evict_waiting(&client)) {
      return false;
    }
  }
  return true;
}

bool Server::Impl::evict_waiting(const std::string* client) {
  const auto it = std::ranges::find_if(waiting_, [&](Connection* c) { return client == nullptr || c->client() == *client; });
  if (it == waiting_.end()) return false;
  counters.evicted += 1;
  (*it)->close();
  return true;
}

void Server::Impl::waiting(Connection& connection) {
  if (connection.is_waiting) return;
  connection.waiting_position = waiting_.insert(waiting_.end(), &connection);
  connection.is_waiting = true;
}

void Server::Impl::not_waiting(Connection& connection) {
  if (!connection.is_waiting) return;
  waiting_.erase(connection.waiting_position);
  connection.is_waiting = false;
}

void Server::Impl::closed(Connection& connection) {
  not_waiting(connection);
  if (const auto it = per_client_.find(connection.client()); it != per_client_.end() && --it->second == 0) {
    per_client_.erase(it);
  }
  connections_.erase(&connection);  // may drop the last reference: `connection` is not used after
  open_ = connections_.size();
  finish_if_drained();
}

void Server::Impl::request_started(Connection&) { in_flight_count_ += 1; }
void Server::Impl::request_finished(Connection&) { in_flight_count_ -= 1; }

void Server::Impl::begin_drain(std::chrono::steady_clock::time_point deadline) {
  if (draining_ && deadline >= drain_deadline_) return;
  if (!draining_) spdlog::info("http: draining {} connections ({} requests in flight)", connections_.size(), in_flight_count_.load());
  draining_ = true;
  drain_deadline_ = deadline;
  beast::error_code ignored;
  acceptor_.close(ignored);
  retry_accept_.cancel();
  // Connections waiting for a request close, but for those whose client has begun one: it gets
  // its 503. (A copy: closing a connection takes it off the list.)
  const std::vector<Connection*> waiting(waiting_.begin(), waiting_.end());
  for (Connection* connection : waiting) connection->drain();
  drain_timer_.expires_at(deadline);
  drain_timer_.async_wait([this](const beast::error_code& ec) {
    if (!ec) end_grace();
  });
  finish_if_drained();
}

void Server::Impl::end_grace() {
  if (!connections_.empty()) spdlog::info("http: grace over; cancelling {} requests", in_flight_count_.load());
  // A copy: a connection that closes leaves the registry.
  std::vector<std::shared_ptr<Connection>> open;
  open.reserve(connections_.size());
  for (const auto& [raw, connection] : connections_) open.push_back(connection);
  for (const auto& connection : open) connection->grace_over();
}

void Server::Impl::finish_if_drained() {
  if (!draining_ || !connections_.empty()) return;
  drain_timer_.cancel();
  keep_running_.reset();  // io_.run() returns once nothing is pending
}

Server::Server(ServerOptions options, Handlers handlers)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handlers))) {}
Server::~Server() = default;
bool Server::listen() { return impl_->listen(); }
void Server::run() { impl_->run(); }
void Server::shutdown(std::chrono::milliseconds grace) { impl_->shutdown(grace); }
int Server::bound_port() const { return impl_->bound_port(); }
ServerStats Server::stats() const { return impl_->stats(); }

std::size_t raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return static_cast<std::size_t>(limit.rlim_cur);
}

}  // namespace prefixd::http
