// One client connection: read a request, hand it to a handler, write the answer, repeat.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <exception>
#include <format>
#include <future>
#include <utility>

#include <spdlog/spdlog.h>

#include "http/server_impl.h"

namespace prefixd::http {
namespace {

Request to_request(bhttp::request<bhttp::string_body>&& message, const std::string& client) {
  Request request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  const auto query = request.target.find('?');
  request.path = request.target.substr(0, query);
  if (query != std::string::npos) request.query = request.target.substr(query + 1);
  for (const auto& field : message) request.headers.push_back({std::string(field.name_string()), std::string(field.value())});
  request.body = std::move(message.body());
  request.client_address = client;
  request.version = message.version();
  return request;
}

std::string_view reason_phrase(int status) {
  const std::string_view reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  return reason.empty() || reason == "<unknown-status>" ? std::string_view("Status") : reason;
}

// The head of a streamed response. HTTP/1.0 has no chunked encoding: the body ends when the
// connection closes.
std::string stream_head(const Response& response, unsigned version, bool chunked, bool keep_alive) {
  std::string head = std::format("HTTP/{}.{} {} {}\r\nContent-Type: {}\r\n", version / 10, version % 10, response.status,
                                 reason_phrase(response.status), response.content_type);
  for (const Header& h : response.headers) head += std::format("{}: {}\r\n", h.name, h.value);
  if (chunked) head += "Transfer-Encoding: chunked\r\n";
  head += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  head += "\r\n";
  return head;
}

class BlockingChunkWriter final : public ChunkWriter {
 public:
  BlockingChunkWriter(std::function<bool(std::string)> write, bool chunked, const std::atomic<bool>& input_ended)
      : write_(std::move(write)), chunked_(chunked), input_ended_(input_ended) {}
  bool write(std::string_view data) override {
    if (failed_) return false;
    if (data.empty()) return true;
    std::string frame = chunked_ ? std::format("{:x}\r\n", data.size()) : std::string();
    frame += data;
    if (chunked_) frame += "\r\n";
    failed_ = !write_(std::move(frame));
    return !failed_;
  }
  bool failed() const { return failed_; }
  bool input_ended() const override { return input_ended_.load(std::memory_order_relaxed); }

 private:
  std::function<bool(std::string)> write_;
  bool chunked_;
  const std::atomic<bool>& input_ended_;
  bool failed_ = false;
};

// Whether the peer answered with a reset. After its end of input, recv() reports 0 even then, so
// this asks TCP: a reset moves the connection to CLOSED, a half-closed peer leaves it in CLOSE_WAIT.
bool peer_reset(int fd) {
  tcp_info info{};
  socklen_t size = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return true;
  return info.tcpi_state == TCP_CLOSE;
}

constexpr std::size_t kBodyReadChunk = 64 * 1024;

// How long a closing connection keeps reading (and dropping) what the client still sends.
constexpr std::chrono::seconds kLinger{2};

}  // namespace

Connection::Connection(Server::Impl& server, tcp::socket socket, std::string client)
    : server_(server), stream_(std::move(socket)), probe_timer_(stream_.get_executor()), client_(std::move(client)) {
  beast::error_code ignored;
  // Streamed tokens are small writes that must not wait for more data to fill a segment.
  stream_.socket().set_option(tcp::no_delay(true), ignored);
}

void Connection::start() { read_request(); }

void Connection::read_request() {
  const ServerOptions& options = server_.options();
  // Draining, a request is read only if its client has begun it (pipelined behind the last one):
  // it gets its 503. A connection with nothing sent closes, as at the start of the drain.
  if (served_ >= options.max_requests_per_connection || (server_.draining() && !request_begun())) return linger_then_close();
  parser_.emplace();
  head_request_ = false;
  parser_->header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(options.max_header_bytes, UINT32_MAX)));
  parser_->body_limit(options.max_body_bytes);
  server_.waiting(*this);
  stream_.expires_after(served_ == 0 ? options.header_timeout : options.keepalive_timeout);
  bhttp::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
    self->on_header(ec);
  });
}

// After a header_limit error: the parser takes the request line as soon as it is complete, so a
// request without a target yet never finished its request line within the limit.
bool Connection::request_line_too_long() const { return parser_->get().target().empty(); }

void Connection::on_header(const beast::error_code& ec) {
  server_.not_waiting(*this);
  if (closed_) return;
  if (ec == bhttp::error::header_limit) {
    if (request_line_too_long()) return reject(414, "the request URL is too long", "uri_too_long");
    return reject(431, "the request headers are too large", "headers_too_large");
  }
  if (ec == bhttp::error::body_limit) return reject_too_large();  // Content-Length over the limit
  if (ec == beast::error::timeout) {
    server_.counters.timeouts += 1;
    return close();
  }
  if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == net::error::operation_aborted ||
      ec == net::error::connection_reset || ec == net::error::broken_pipe) {
    return close();
  }
  if (ec) return reject(400, std::format("malformed HTTP request: {}", ec.message()), "bad_request");
  const auto& message = parser_->get();
  version_ = message.version();
  head_request_ = message.method() == bhttp::verb::head;
  if (message.target().size() > server_.options().max_target_bytes) {
    return reject(414, "the request URL is too long", "uri_too_long");
  }
  if (const auto length = parser_->content_length(); length && *length > server_.options().max_body_bytes) {
    return reject_too_large();
  }
  if (parser_->is_done()) return dispatch();
  if (version_ >= 11 && beast::iequals(message[bhttp::field::expect], "100-continue")) {
    // The client waits for this before sending a large body.
    auto interim = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    stream_.expires_after(server_.options().write_timeout);
    net::async_write(stream_, net::buffer(*interim), [self = shared_from_this(), interim](const beast::error_code& write_ec, std::size_t) {
      if (write_ec) return self->close();
      self->read_body();
    });
    return;
  }
  read_body();
}

void Connection::read_body() {
  // Beast reads into the free space the buffer has (at least 512 bytes, at most 64 KiB): without
  // room, a large body arrives 512 bytes per system call. The room is given back in dispatch(), so
  // idle connections stay small.
  buffer_.reserve(kBodyReadChunk);
  stream_.expires_after(server_.options().body_timeout);
  bhttp::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
    self->on_body(ec);
  });
}

void Connection::on_body(const beast::error_code& ec) {
  if (closed_) return;
  if (ec == bhttp::error::body_limit) return reject_too_large();
  if (ec == beast::error::timeout) {
    server_.counters.timeouts += 1;
    return close();
  }
  if (ec) return close();
  dispatch();
}

void Connection::dispatch() {
  stream_.expires_never();
  const bool keep_alive = parser_->get().keep_alive();
  Request request = to_request(parser_->release(), client_);
  parser_.reset();
  buffer_.shrink_to_fit();  // keeps pipelined bytes, frees the room a body read reserved
  served_ += 1;
  server_.counters.requests += 1;
  if (server_.draining()) {
    return respond(server_.handlers().error(503, "the server is shutting down", "server_shutting_down"), keep_alive);
  }
  cancel_->store(0);
  response_started_ = false;
  input_ended_ = false;
  probe_on_write_ = false;
  request.attach_cancel_flag(cancel_);
  const Handlers& handlers = server_.handlers();
  if (handlers.is_quick && handlers.is_quick(request)) {
    Response response;
    try {
      response = handlers.handle(request);
    } catch (const std::exception& e) {
      response = handlers.error(500, std::format("internal error: {}", e.what()), "internal_error");
    }
    return respond(std::move(response), keep_alive);
  }
  in_flight_ = true;
  server_.request_started(*this);
  watch_peer();
  server_.workers().post([self = shared_from_this(), request = std::move(request), keep_alive]() mutable {
    self->handle_on_worker(std::move(request), keep_alive);
  });
}

// Worker thread.
void Connection::handle_on_worker(Request request, bool keep_alive) {
  const Handlers& handlers = server_.handlers();
  const std::size_t body_bytes = request.body.size();  // the handler may take the body
  if (handlers.began) handlers.began(body_bytes);
  Response response;
  try {
    response = handlers.handle(request);
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", request.method, request.path, e.what());
    response = handlers.error(500, std::format("internal error: {}", e.what()), "internal_error");
  }
  if (!response.stream) {
    net::post(server_.io(), [self = shared_from_this(), response = std::move(response), keep_alive]() mutable {
      self->in_flight_ = false;
      self->server_.request_finished(*self);
      self->respond(std::move(response), keep_alive);
    });
    if (handlers.finished) handlers.finished(body_bytes);
    return;
  }
  const bool chunked = request.version >= 11;
  const bool keep = keep_alive && chunked && !response.close_connection;
  BlockingChunkWriter writer([this](std::string bytes) { return write_blocking(std::move(bytes)); }, chunked,
                             input_ended_);
  bool ok = write_blocking(stream_head(response, request.version, chunked, keep));
  if (ok) {
    try {
      response.stream(writer);
    } catch (const std::exception& e) {
      spdlog::error("{} {}: stream: {}", request.method, request.path, e.what());
      ok = false;  // the body is cut short: the client must not take it as complete
    }
    ok = ok && !writer.failed() && (!chunked || write_blocking("0\r\n\r\n"));
  }
  response = Response{};  // the stream's state (and its request) goes before the connection moves on
  net::post(server_.io(), [self = shared_from_this(), ok, keep] {
    self->in_flight_ = false;
    self->server_.request_finished(*self);
    if (!ok) return self->close();
    self->after_response(keep);
  });
  if (handlers.finished) handlers.finished(body_bytes);
}

bool Connection::write_blocking(std::string bytes) {
  if (write_failed_) return false;
  auto done = std::make_shared<std::promise<bool>>();
  auto finished = done->get_future();
  auto data = std::make_shared<std::string>(std::move(bytes));
  net::post(server_.io(), [self = shared_from_this(), data, done] {
    if (self->closed_) return done->set_value(false);
    self->response_started_ = true;
    self->stream_.expires_after(self->server_.options().write_timeout);
    net::async_write(self->stream_, net::buffer(*data), [self, data, done](const beast::error_code& ec, std::size_t) {
      if (ec == beast::error::timeout) self->server_.counters.timeouts += 1;
      // The first write after the client's end of input: a closed client answers it with a reset.
      if (!ec && self->probe_on_write_ && self->in_flight_) {
        self->probe_on_write_ = false;
        self->check_for_reset(0);
      }
      done->set_value(!ec);
    });
  });
  bool ok = false;
  try {
    ok = finished.get();
  } catch (const std::future_error&) {
    ok = false;  // the I/O loop went away with the write pending
  }
  if (!ok) {
    write_failed_ = true;
    int expected = 0;
    cancel_->compare_exchange_strong(expected, static_cast<int>(CancelReason::client_gone));
  }
  return ok;
}

void Connection::respond(Response response, bool keep_alive) {
  if (closed_) return;
  response_started_ = true;
  // Draining, the connection stays open only for a request already begun behind this one, so the
  // last answer on it says `Connection: close`.
  const bool keep = keep_alive && !response.close_connection && (!server_.draining() || request_begun()) &&
                    served_ < server_.options().max_requests_per_connection;
  auto message = std::make_shared<bhttp::response<bhttp::string_body>>();
  message->version(version_);
  message->result(static_cast<unsigned>(response.status));
  for (const Header& h : response.headers) message->insert(h.name, h.value);
  if (!response.content_type.empty()) message->set(bhttp::field::content_type, response.content_type);
  message->body() = std::move(response.body);
  message->keep_alive(keep);
  message->prepare_payload();
  if (head_request_) {
    // A HEAD is answered with the head a GET would get, Content-Length included, and no body.
    const std::size_t length = message->body().size();
    message->body().clear();
    message->content_length(length);
  }
  stream_.expires_after(server_.options().write_timeout);
  bhttp::async_write(stream_, *message, [self = shared_from_this(), message, keep](const beast::error_code& ec, std::size_t) {
    if (ec) {
      if (ec == beast::error::timeout) self->server_.counters.timeouts += 1;
      return self->close();
    }
    self->after_response(keep);
  });
}

void Connection::reject(int status, std::string_view message, std::string_view code) {
  server_.counters.rejected += 1;
  parser_.reset();  // no request is arriving any more: the connection closes after this answer
  Response response = server_.handlers().error(status, message, code);
  response.close_connection = true;
  respond(std::move(response), false);
}

void Connection::reject_too_large() {
  reject(413, std::format("the request body is larger than {} bytes", server_.options().max_body_bytes),
         "request_too_large");
}

void Connection::after_response(bool keep_alive) {
  if (keep_alive) return read_request();
  linger_then_close();
}

bool Connection::request_begun() {
  if (parser_ && parser_->got_some()) return true;
  if (buffer_.size() > 0) return true;  // pipelined bytes, or a request line and headers not yet complete
  beast::error_code ec;
  const std::size_t unread = stream_.socket().available(ec);
  return !ec && unread > 0;
}

void Connection::drain() {
  if (!request_begun()) close();
}

void Connection::grace_over() {
  if (in_flight_) return cancel(CancelReason::shutdown);
  if (parser_) close();
}

// Closing with unread bytes from the client makes the kernel send a reset, which can destroy the
// response before the client reads it (a 413 for a body still arriving). So: stop sending, read
// and drop what still comes for a moment, then close.
void Connection::linger_then_close() {
  if (closed_) return;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(kLinger);
  discard_input();
}

void Connection::discard_input() {
  stream_.async_read_some(net::buffer(discard_), [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
    if (ec) return self->close();  // end of input, the deadline or an error
    self->discard_input();
  });
}

// While a worker handles the request nothing reads the socket; this notices a client that resets
// the connection (nobody is left to answer) or that stops sending.
void Connection::watch_peer() {
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](const beast::error_code& ec) {
    if (ec || self->closed_ || !self->in_flight_) return;
    char byte = 0;
    const ssize_t n = ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return;  // pipelined bytes: read after this response
    if (n == 0) return self->probe_after_end_of_input();
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return self->watch_peer();
    self->cancel(CancelReason::client_gone);
  });
}

// The client sent its last byte. That is a half-close (it still reads the answer) or a close (it
// is gone), and only a write tells them apart: a closed socket answers data with a reset. Once a
// streamed response has begun, its streamer is told (ChunkWriter::input_ended) and writes a frame
// that adds nothing, and the reset is looked for after that write. Before the response has
// begun, the one thing HTTP/1.1 lets a server write is an interim response, which clients skip;
// HTTP/1.0 clients must not get one, so their requests run to the end.
void Connection::probe_after_end_of_input() {
  if (response_started_) {
    probe_on_write_ = true;
    input_ended_ = true;
    return;
  }
  if (version_ < 11) return;
  constexpr std::string_view probe = "HTTP/1.1 102 Processing\r\n\r\n";
  // Nothing else is being written (the response has not begun), so the send buffer takes it whole.
  if (::send(stream_.socket().native_handle(), probe.data(), probe.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
    return cancel(CancelReason::client_gone);
  }
  check_for_reset(0);
}

void Connection::check_for_reset(int attempt) {
  constexpr std::array<std::chrono::milliseconds, 4> kWaits{std::chrono::milliseconds(50), std::chrono::milliseconds(250),
                                                            std::chrono::milliseconds(1000), std::chrono::milliseconds(4000)};
  if (attempt >= static_cast<int>(kWaits.size())) return;
  probe_timer_.expires_after(kWaits[static_cast<std::size_t>(attempt)]);
  probe_timer_.async_wait([self = shared_from_this(), attempt](const beast::error_code& ec) {
    if (ec || self->closed_ || !self->in_flight_) return;
    if (peer_reset(self->stream_.socket().native_handle())) return self->cancel(CancelReason::client_gone);
    self->check_for_reset(attempt + 1);
  });
}

void Connection::cancel(CancelReason reason) {
  if (!in_flight_) return;
  int expected = 0;
  cancel_->compare_exchange_strong(expected, static_cast<int>(reason));
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  auto self = shared_from_this();  // the registry may hold the last reference
  probe_timer_.cancel();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  server_.closed(*this);
}

}  // namespace prefixd::http
