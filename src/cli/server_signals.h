// prefixd cli — the signals a running server answers: SIGINT and SIGTERM drain and stop it,
// SIGHUP reloads its key file.
#pragma once

#include <chrono>
#include <csignal>
#include <functional>
#include <thread>

#include "api/server.h"

namespace prefixd::cli {

// Blocks SIGINT, SIGTERM and SIGHUP in every thread and waits for them on a dedicated one, so the
// server needs no signal handler and no global state. Construct it before any other thread starts
// (threads inherit the mask).
class ServerSignals {
 public:
  ServerSignals();
  // Waits for signals until stop(): the first SIGINT/SIGTERM drains the server within `grace`, a
  // second one ends what still runs at once; SIGHUP calls `reload` (on the signal thread).
  void start(api::HttpServer& server, std::chrono::milliseconds grace, std::function<void()> reload);
  // The same for any server: `shutdown(grace)` drains it.
  void start(std::function<void(std::chrono::milliseconds)> shutdown, std::chrono::milliseconds grace,
             std::function<void()> reload);
  // Ends the waiter; call it before the server it was started with goes away.
  void stop();
  ~ServerSignals();
  ServerSignals(const ServerSignals&) = delete;
  ServerSignals& operator=(const ServerSignals&) = delete;

 private:
  sigset_t set_;
  std::jthread waiter_;
};

}  // namespace prefixd::cli
