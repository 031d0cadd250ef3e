// prefixd http — what a handler sees of one HTTP exchange.
//
// Plain values: the transport (server.h) fills a Request from the wire and turns a Response back
// into bytes; handlers never touch sockets. A streamed response hands its handler a ChunkWriter
// whose writes block the handler's worker thread until the bytes are out (or the client is gone),
// which is the backpressure a slow reader puts on its own request and on nothing else.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prefixd::http {

struct Header {
  std::string name;
  std::string value;
};

// Why a request in flight should stop early; none while it may run to completion.
enum class CancelReason : int { none = 0, client_gone = 1, shutdown = 2 };

class Request {
 public:
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // target up to '?'
  std::string query;   // after '?', without it; empty if none
  std::vector<Header> headers;
  std::string body;
  std::string client_address;
  unsigned version = 11;  // 10 for HTTP/1.0, 11 for HTTP/1.1

  // Case-insensitive; the first header of that name, empty if there is none.
  std::string_view header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  // The value of `name` in the query string (percent-decoded, '+' as space); empty if absent.
  std::string query_param(std::string_view name) const;

  // Set by the transport when the client resets the connection, a write to it fails, or the
  // server's shutdown grace has run out. Handlers poll it while they wait.
  CancelReason cancelled() const {
    return cancel_ ? static_cast<CancelReason>(cancel_->load(std::memory_order_relaxed)) : CancelReason::none;
  }
  void attach_cancel_flag(std::shared_ptr<const std::atomic<int>> flag) { cancel_ = std::move(flag); }

 private:
  std::shared_ptr<const std::atomic<int>> cancel_;
};

// Blocking writer of a streamed body. write() returns false once the client is gone or a write
// timed out; every later write fails too.
class ChunkWriter {
 public:
  virtual ~ChunkWriter() = default;
  virtual bool write(std::string_view data) = 0;
  // True once the client has sent its end of input while this response streams: a half-close (it
  // still reads) or a close (it is gone). Only a write tells which (a closed peer answers it with a
  // reset, which the transport then notices), so a streamer that is silent should write something
  // harmless soon after this turns true.
  virtual bool input_ended() const { return false; }
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<Header> headers;
  // Set for a streamed response: the head is sent first (chunked for HTTP/1.1), then this runs on
  // the request's worker thread and writes the body; the response ends when it returns.
  std::function<void(ChunkWriter&)> stream;
  // After this response the connection is closed even if the client asked to keep it.
  bool close_connection = false;
};

}  // namespace prefixd::http
