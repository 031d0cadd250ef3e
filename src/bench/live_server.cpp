#include "bench/live_server.h"

#include <algorithm>
#include <thread>

#include <httplib.h>

namespace prefixd::bench {

LiveServer::LiveServer(const Target& target, ServerSettings settings, std::string log_path,
                       std::chrono::seconds startup_limit, std::chrono::steady_clock::time_point origin)
    : target_(target),
      settings_(std::move(settings)),
      log_path_(std::move(log_path)),
      startup_limit_(startup_limit),
      origin_(origin) {
  counters_.push_back({.metric = target_.evaluated_counter()});
  if (const char* warmup = target_.warmup_counter()) counters_.push_back({.metric = warmup});
  start();
}

LiveServer::~LiveServer() { stop(); }

void LiveServer::start() {
  const int port = pick_free_port();
  server_ = std::make_unique<ServerProcess>(target_.launch(settings_, port, log_path_, startup_limit_), port);
  sampler_ = std::make_unique<RssSampler>(server_->pid(), origin_, rss_, rss_lock_);
  const std::string metrics = read_metrics();
  for (Counter& c : counters_) {
    const double value = prometheus_value(metrics, c.metric);
    c.missing = c.missing || value < 0;
    c.start = std::max(0.0, value);
  }
}

void LiveServer::stop() {
  if (!server_) return;
  sampler_.reset();
  if (server_->running()) {
    peak_kb_ = std::max(peak_kb_, read_proc_memory(server_->pid()).hwm_kb);
    const std::string metrics = read_metrics();
    for (Counter& c : counters_) {
      if (const double value = prometheus_value(metrics, c.metric); value >= 0) c.done += value - c.start;
    }
  }
  server_.reset();  // SIGTERM, then SIGKILL after a grace period
}

void LiveServer::restart() {
  stop();
  start();
  ++restarts_;
}

long LiveServer::peak_kb() {
  if (server_ && server_->running()) peak_kb_ = std::max(peak_kb_, read_proc_memory(server_->pid()).hwm_kb);
  return peak_kb_;
}

double LiveServer::counter_total(Counter& c) {
  if (c.missing) return -1;
  const double value = server_ && server_->running() ? prometheus_value(read_metrics(), c.metric) : -1;
  return c.done + (value >= 0 ? value - c.start : 0);
}

bool LiveServer::wait_idle(std::chrono::milliseconds limit) {
  const char* gauge = target_.running_gauge();
  if (gauge == nullptr) return true;
  // A warm-up joins the running requests a moment after the reply that starts it has been sent,
  // so one idle reading right after a reply can come too early: idle twice, 50 ms apart.
  constexpr auto kPoll = std::chrono::milliseconds(50);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int idle_readings = 0;
  while (server_ && server_->running()) {
    idle_readings = prometheus_value(read_metrics(), gauge) == 0 ? idle_readings + 1 : 0;
    if (idle_readings == 2) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPoll);
  }
  return false;
}

RssSeries LiveServer::rss() {
  const std::lock_guard<std::mutex> guard(rss_lock_);
  return rss_;
}

std::string LiveServer::read_metrics() {
  httplib::Client client("127.0.0.1", server_->port());
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(30));
  const auto res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : std::string();
}

}  // namespace prefixd::bench
