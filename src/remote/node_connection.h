// prefixd remote — one lazily (re)connected hiredis connection to one node, with a deadline on
// every call and a backoff after failures so a dead node is not hammered.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "remote/remote_counters.h"
#include "remote/remote_endpoint.h"

struct redisContext;

namespace prefixd::remote {

// One reply of a pipelined command, reduced to what the store needs.
struct NodeReply {
  enum class Kind { value, nil, status, integer, error, array };
  Kind kind = Kind::nil;
  std::string text;                     // value, status or error text
  long long integer = 0;                // for Kind::integer
  std::vector<NodeReply> elements;      // for Kind::array
};

using Command = std::vector<std::string>;

struct Backoff {
  std::chrono::milliseconds initial{100};
  std::chrono::milliseconds max{5000};
};

// Not thread-safe: the owner serializes calls (hiredis contexts are single-threaded).
class NodeConnection {
 public:
  // REQUIRES: `counters` outlives the connection (it counts connection attempts).
  NodeConnection(RemoteEndpoint endpoint, std::chrono::milliseconds timeout, Backoff backoff,
                 RemoteCounterSink& counters);
  ~NodeConnection();
  NodeConnection(const NodeConnection&) = delete;
  NodeConnection& operator=(const NodeConnection&) = delete;

  // Sends every command in one write and reads one reply each: one round trip. Connects first
  // when there is no connection. Returns nullopt — and drops the connection, and starts or
  // lengthens the backoff — on any connection failure or when a socket operation exceeds the
  // timeout; during the backoff it returns nullopt at once without touching the network.
  // Server error replies are replies (Kind::error), not failures.
  std::optional<std::vector<NodeReply>> pipeline(const std::vector<Command>& commands);

  const RemoteEndpoint& endpoint() const { return endpoint_; }
  const std::string& last_error() const { return last_error_; }

 private:
  struct ContextFree {
    void operator()(redisContext* context) const;
  };
  bool connect();
  void fail(std::string why);

  RemoteEndpoint endpoint_;
  std::chrono::milliseconds timeout_;
  Backoff backoff_;
  RemoteCounterSink& counters_;
  std::unique_ptr<redisContext, ContextFree> context_;
  std::chrono::milliseconds current_backoff_{0};  // 0 while the node is healthy
  std::chrono::steady_clock::time_point next_attempt_{};
  std::string last_error_;
};

}  // namespace prefixd::remote
