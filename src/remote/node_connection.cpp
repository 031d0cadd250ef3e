#include "remote/node_connection.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <ctime>

#include <spdlog/spdlog.h>

namespace prefixd::remote {
namespace {

timeval to_timeval(std::chrono::microseconds duration) {
  const auto us = std::max<long long>(duration.count(), 1000);
  return timeval{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
}

NodeReply convert(const redisReply& reply) {
  NodeReply out;
  switch (reply.type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_VERB:
      out.kind = NodeReply::Kind::value;
      out.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_STATUS:
      out.kind = NodeReply::Kind::status;
      out.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_ERROR:
      out.kind = NodeReply::Kind::error;
      out.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.kind = NodeReply::Kind::integer;
      out.integer = reply.integer;
      break;
    case REDIS_REPLY_ARRAY:
    case REDIS_REPLY_SET:
    case REDIS_REPLY_PUSH:
    case REDIS_REPLY_MAP:
      out.kind = NodeReply::Kind::array;
      for (std::size_t i = 0; i < reply.elements; ++i) out.elements.push_back(convert(*reply.element[i]));
      break;
    default:
      out.kind = NodeReply::Kind::nil;
      break;
  }
  return out;
}

// hiredis writes with plain send(): writing to a connection the peer reset raises SIGPIPE, which
// would kill the process. While alive, this blocks SIGPIPE for the calling thread only and, on
// the way out, swallows a SIGPIPE the block caught, so no process-wide disposition changes.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &previous_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        sigset_t only;
        sigemptyset(&only);
        sigaddset(&only, SIGPIPE);
        const timespec zero{0, 0};
        sigtimedwait(&only, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t previous_{};
  bool was_pending_ = false;
};

}  // namespace

void NodeConnection::ContextFree::operator()(redisContext* context) const { redisFree(context); }

NodeConnection::NodeConnection(RemoteEndpoint endpoint, std::chrono::milliseconds timeout, Backoff backoff,
                               RemoteCounterSink& counters)
    : endpoint_(std::move(endpoint)), timeout_(timeout), backoff_(backoff), counters_(counters) {}

NodeConnection::~NodeConnection() = default;

void NodeConnection::fail(std::string why) {
  context_.reset();
  current_backoff_ = current_backoff_.count() == 0 ? backoff_.initial : std::min(current_backoff_ * 2, backoff_.max);
  next_attempt_ = std::chrono::steady_clock::now() + current_backoff_;
  if (why != last_error_) {
    spdlog::warn("remote store: node {} failed: {} (next attempt in {} ms)", endpoint_.address(), why,
                 current_backoff_.count());
  }
  last_error_ = std::move(why);
}

bool NodeConnection::connect() {
  counters_.add_connect();
  context_.reset(redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, to_timeval(timeout_)));
  if (!context_) {
    fail("cannot allocate a connection");
    return false;
  }
  if (context_->err != 0) {
    fail(std::string("connect: ") + context_->errstr);
    return false;
  }
  return true;
}

std::optional<std::vector<NodeReply>> NodeConnection::pipeline(const std::vector<Command>& commands) {
  const auto start = std::chrono::steady_clock::now();
  if (current_backoff_.count() != 0 && start < next_attempt_) return std::nullopt;
  SigpipeGuard sigpipe_guard;
  if (!context_ && !connect()) return std::nullopt;
  // The whole call shares one budget: what the connect used is not available to the reads.
  const auto remaining = timeout_ - std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now() - start);
  if (redisSetTimeout(context_.get(), to_timeval(remaining)) != REDIS_OK) {
    fail("cannot set the socket timeout");
    return std::nullopt;
  }
  for (const auto& command : commands) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& arg : command) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_.get(), static_cast<int>(argv.size()), argv.data(), lengths.data()) != REDIS_OK) {
      fail(std::string("append: ") + context_->errstr);
      return std::nullopt;
    }
  }
  std::vector<NodeReply> replies;
  replies.reserve(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_.get(), &raw) != REDIS_OK || raw == nullptr) {
      fail(context_->err != 0 ? std::string(context_->errstr) : std::string("no reply"));
      return std::nullopt;
    }
    std::unique_ptr<redisReply, decltype(&freeReplyObject)> reply(static_cast<redisReply*>(raw), &freeReplyObject);
    replies.push_back(convert(*reply));
  }
  current_backoff_ = std::chrono::milliseconds{0};
  return replies;
}

}  // namespace prefixd::remote
