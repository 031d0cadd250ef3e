// prefixd bench — a running server with its memory sampler, restartable with the same settings.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/server_process.h"
#include "bench/rss.h"
#include "bench/target.h"

namespace prefixd::bench {

class LiveServer {
 public:
  LiveServer(const Target& target, ServerSettings settings, std::string log_path, std::chrono::seconds startup_limit,
             std::chrono::steady_clock::time_point origin);
  ~LiveServer();
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  // Stops the server (its memory and prompt cache go with it) and starts it again.
  void restart();
  int port() const { return server_ ? server_->port() : 0; }
  bool running() { return server_ && server_->running(); }
  std::string command_line() const { return server_ ? server_->command_line() : ""; }
  std::string log_tail() const { return server_ ? server_->log_tail() : ""; }
  int restarts() const { return restarts_; }

  // Peak VmHWM over every lifetime so far, in kB.
  long peak_kb();
  // Prompt tokens the server's own counter says it evaluated, summed over lifetimes; -1 when it
  // has no such counter.
  double evaluated_counter() { return counter_total(counters_[0]); }
  // Tokens the server evaluated after replies (Target::warmup_counter), summed over lifetimes; -1
  // when it has no such counter.
  double warmup_counter() { return counters_.size() > 1 ? counter_total(counters_[1]) : -1; }
  // Waits until the server holds no request (a warm-up after the last reply included), at most
  // `limit`; true when it got there. A server without such a gauge is idle once it has answered.
  bool wait_idle(std::chrono::milliseconds limit);
  // The RSS samples so far.
  RssSeries rss();

 private:
  void start();
  void stop();
  // One Prometheus counter followed over the server's lifetimes.
  struct Counter {
    std::string metric;
    double done = 0;   // counted in earlier lifetimes
    double start = 0;  // the counter when this lifetime began
    bool missing = false;
  };
  double counter_total(Counter& c);
  // The server's /metrics page; empty when it does not answer.
  std::string read_metrics();

  const Target& target_;
  ServerSettings settings_;
  std::string log_path_;
  std::chrono::seconds startup_limit_;
  std::chrono::steady_clock::time_point origin_;
  // The series outlives the samplers that append to it (members are destroyed in reverse order).
  std::mutex rss_lock_;
  RssSeries rss_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<RssSampler> sampler_;
  long peak_kb_ = -1;
  std::vector<Counter> counters_;  // [0]: evaluated tokens; [1]: warm-up tokens, when the target has them
  int restarts_ = 0;
};

}  // namespace prefixd::bench
