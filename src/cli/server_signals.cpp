#include "cli/server_signals.h"

#include <pthread.h>

#include <spdlog/spdlog.h>

namespace prefixd::cli {

ServerSignals::ServerSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGHUP);
  // SIGUSR2 only wakes the waiter when serving has ended (see stop()).
  sigaddset(&set_, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

void ServerSignals::start(api::HttpServer& server, std::chrono::milliseconds grace, std::function<void()> reload) {
  start([&server](std::chrono::milliseconds g) { server.shutdown(g); }, grace, std::move(reload));
}

void ServerSignals::start(std::function<void(std::chrono::milliseconds)> shutdown, std::chrono::milliseconds grace,
                          std::function<void()> reload) {
  waiter_ = std::jthread([this, shutdown = std::move(shutdown), grace, reload = std::move(reload)] {
    for (int stops = 0;;) {
      int signal = 0;
      if (sigwait(&set_, &signal) != 0 || signal == SIGUSR2) return;
      if (signal == SIGHUP) {
        if (reload) reload();
        continue;
      }
      if (++stops == 1) {
        spdlog::info("signal {}: shutting down; requests in flight have {:.1f} s to finish", signal,
                     static_cast<double>(grace.count()) / 1000);
        shutdown(grace);
      } else {
        spdlog::info("signal {}: ending the requests still running", signal);
        shutdown(std::chrono::milliseconds(0));
      }
    }
  });
}

void ServerSignals::stop() {
  if (!waiter_.joinable()) return;
  pthread_kill(waiter_.native_handle(), SIGUSR2);
  waiter_.join();
}

ServerSignals::~ServerSignals() { stop(); }

}  // namespace prefixd::cli
