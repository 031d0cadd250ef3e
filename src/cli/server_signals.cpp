#include "cli/server_signals.h"

#include <pthread.h>

#include <spdlog/spdlog.h>

namespace prefixd::cli {

ServerSignals::ServerSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGHUP);
  // SIGUSR2 only wakes the waiter when the server is gone (see the destructor).
  sigaddset(&set_, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

void ServerSignals::start(api::HttpServer& server, std::function<void()> reload) {
  waiter_ = std::jthread([this, &server, reload = std::move(reload)] {
    for (;;) {
      int signal = 0;
      if (sigwait(&set_, &signal) != 0 || signal == SIGUSR2) return;
      if (signal == SIGHUP) {
        if (reload) reload();
        continue;
      }
      spdlog::info("signal {}: shutting down", signal);
      server.stop();
      return;
    }
  });
}

ServerSignals::~ServerSignals() {
  if (waiter_.joinable()) pthread_kill(waiter_.native_handle(), SIGUSR2);
}

}  // namespace prefixd::cli
