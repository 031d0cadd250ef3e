// prefixd cli — the signals a running server answers: SIGINT and SIGTERM stop it, SIGHUP reloads
// its key file.
#pragma once

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
  // Waits for signals until the server is asked to stop: SIGINT/SIGTERM call server.stop(),
  // SIGHUP calls `reload` (on the signal thread) and keeps waiting.
  void start(api::HttpServer& server, std::function<void()> reload);
  ~ServerSignals();
  ServerSignals(const ServerSignals&) = delete;
  ServerSignals& operator=(const ServerSignals&) = delete;

 private:
  sigset_t set_;
  std::jthread waiter_;
};

}  // namespace prefixd::cli
