// prefixd bench — a running server with its memory sampler, restartable with the same settings.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

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
  double evaluated_counter();
  // The RSS samples so far.
  RssSeries rss();

 private:
  void start();
  void stop();
  double read_counter();

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
  double counter_done_ = 0;   // evaluated in earlier lifetimes
  double counter_start_ = 0;  // the counter when this lifetime began
  bool counter_missing_ = false;
  int restarts_ = 0;
};

}  // namespace prefixd::bench
