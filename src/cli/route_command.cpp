// `prefixd route`: options in, router::Router out (src/router/router.h). SIGINT and SIGTERM stop it.
#include <csignal>
#include <cstdint>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "router/router.h"

namespace prefixd::cli {

namespace {

// SIGINT and SIGTERM blocked in every thread (construct it before any thread starts) and waited
// for on one thread, which stops the router: no signal handler, no global state.
class RouterSignals {
 public:
  RouterSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  void start(router::Router& router, std::chrono::milliseconds grace) {
    waiter_ = std::jthread([this, &router, grace](const std::stop_token& stop) {
      const timespec tick{0, 200'000'000};
      while (!stop.stop_requested()) {
        if (sigtimedwait(&set_, nullptr, &tick) > 0) {
          spdlog::info("stopping the router");
          router.shutdown(grace);
          return;
        }
      }
    });
  }
  void stop() {
    waiter_.request_stop();
    if (waiter_.joinable()) waiter_.join();
  }

 private:
  sigset_t set_;
  std::jthread waiter_;
};

}  // namespace

std::function<int()> add_route_command(CLI::App& app) {
  struct Parsed {
    router::RouterOptions options;
    std::string policy = "prefix";
    std::int64_t health_ms = 500;
    std::int64_t summary_ms = 500;
    double grace_s = 30;
  };
  auto p = std::make_shared<Parsed>();
  router::RouterOptions& o = p->options;
  o.http.port = 8080;
  o.http.workers = 256;
  CLI::App* cmd = app.add_subcommand(
      "route", "Prefix-aware router: send each request to the prefixd backend that holds most of its prompt "
               "(docs/operator-guide.md, \"Routing\")");
  cmd->add_option("--backend", o.backends, "A backend's base URL, http://HOST:PORT (repeat for each)")->required();
  cmd->add_option("--host", o.http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o.http.port, "Port to listen on (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--policy", p->policy, "prefix (most prefix held, sessions sticky) or round_robin")
      ->capture_default_str()->check(CLI::IsMember({"prefix", "round_robin"}));
  cmd->add_option("--health-interval-ms", p->health_ms, "Milliseconds between health checks of each backend")
      ->capture_default_str()->check(CLI::Range(10, 3'600'000));
  cmd->add_option("--summary-interval-ms", p->summary_ms, "Milliseconds between cache summary polls of each backend")
      ->capture_default_str()->check(CLI::Range(10, 3'600'000));
  cmd->add_option("--load-weight", o.load_weight,
                  "Prompt tokens one running or queued request on a backend weighs against the prefix it holds")
      ->capture_default_str()->check(CLI::Range(0.0, 1e9));
  cmd->add_flag("--kv-events,!--no-kv-events", o.kv_events,
                "Follow the KV events of backends that publish them (--kv-events-endpoint) instead of reading "
                "their summaries' block lists")
      ->capture_default_str();
  cmd->add_option("--backend-api-key", o.backend_api_key,
                  "Key the router's own calls send (the backends' admin key, for GET /v1/cache/summary)");
  cmd->add_option("--http-workers", o.http.workers, "Requests forwarded at once (each stream holds one)")
      ->capture_default_str()->check(CLI::Range(1, 65536));
  cmd->add_option("--shutdown-grace-seconds", p->grace_s, "On SIGTERM, how long requests in flight may finish")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  return [p]() {
    router::RouterOptions options = p->options;
    options.policy = router::parse_policy(p->policy);
    options.health_interval = std::chrono::milliseconds(p->health_ms);
    options.summary_interval = std::chrono::milliseconds(p->summary_ms);
    RouterSignals signals;  // before any thread starts, so all of them inherit the mask
    router::Router router(std::move(options));
    signals.start(router, std::chrono::milliseconds(static_cast<std::int64_t>(p->grace_s * 1000)));
    const bool served = router.run();
    signals.stop();
    return served ? 0 : 1;
  };
}

}  // namespace prefixd::cli
