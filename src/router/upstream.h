// prefixd router — one HTTP exchange with a backend, run on its own thread so that the router can
// wait for the answer's first bytes (and retry elsewhere when none come) and then relay the rest
// as it arrives, without buffering a stream.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "http/message.h"
#include "router/backend.h"

namespace httplib {
class Client;
}

namespace prefixd::router {

struct UpstreamRequest {
  std::string method = "POST";
  std::string path;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // forwarded as they are
};

struct UpstreamTimeouts {
  std::chrono::milliseconds connect{2000};
  std::chrono::milliseconds read{600'000};  // a cold prefill of a long prompt on a CPU takes minutes
};

class UpstreamCall {
 public:
  // Starts the exchange at once.
  UpstreamCall(const BackendAddress& address, UpstreamRequest request, UpstreamTimeouts timeouts);
  // Stops reading (the backend sees the connection close) and joins the thread.
  ~UpstreamCall();
  UpstreamCall(const UpstreamCall&) = delete;
  UpstreamCall& operator=(const UpstreamCall&) = delete;

  // What came before any body byte was handed on.
  struct Head {
    bool answered = false;     // a status line came; false: refused, reset or timed out before it
    int status = 0;
    std::string content_type;
    std::string error;         // why not answered, or why the exchange failed before a body byte
    bool failed_before_body = false;  // answered, then failed before any body byte
  };
  // Blocks until the first body bytes have arrived, or the exchange is over.
  Head wait_head();
  // The next piece of the body, in order; nullopt once the exchange is over (see failure()).
  std::optional<std::string> next();
  // Why the exchange ended early; empty when it ended whole. Valid once next() returned nullopt.
  std::string failure() const;
  // The rest of the body (for an answer that is not a stream).
  std::string read_all();

 private:
  void run(UpstreamRequest request);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> chunks_;
  bool answered_ = false;
  int status_ = 0;
  std::string content_type_;
  bool got_body_ = false;
  bool done_ = false;
  std::string error_;
  bool cancelled_ = false;
  std::unique_ptr<httplib::Client> client_;  // stop() from the destructor ends a blocked read at once
  std::jthread thread_;  // last: it uses every member above
};

// Relays the rest of `call`'s event stream to `out` as it arrives. When the exchange ends early,
// the client gets one last SSE event, an error with code `upstream_failed` whose message names
// `who` ("the backend", "the model's server") and the cause, and the cause is returned; empty when
// the stream ended whole or the client left first.
std::string relay_event_stream(UpstreamCall& call, http::ChunkWriter& out, std::string_view who);

}  // namespace prefixd::router
