#include "bench/live_server.h"

#include <algorithm>

#include <httplib.h>

namespace prefixd::bench {

LiveServer::LiveServer(const Target& target, ServerSettings settings, std::string log_path,
                       std::chrono::seconds startup_limit, std::chrono::steady_clock::time_point origin)
    : target_(target),
      settings_(std::move(settings)),
      log_path_(std::move(log_path)),
      startup_limit_(startup_limit),
      origin_(origin) {
  start();
}

LiveServer::~LiveServer() { stop(); }

void LiveServer::start() {
  const int port = pick_free_port();
  server_ = std::make_unique<ServerProcess>(target_.launch(settings_, port, log_path_, startup_limit_), port);
  sampler_ = std::make_unique<RssSampler>(server_->pid(), origin_, rss_, rss_lock_);
  const double c = read_counter();
  counter_missing_ = counter_missing_ || c < 0;
  counter_start_ = std::max(0.0, c);
}

void LiveServer::stop() {
  if (!server_) return;
  sampler_.reset();
  if (server_->running()) {
    peak_kb_ = std::max(peak_kb_, read_proc_memory(server_->pid()).hwm_kb);
    const double c = read_counter();
    if (c >= 0) counter_done_ += c - counter_start_;
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

double LiveServer::evaluated_counter() {
  if (counter_missing_) return -1;
  const double c = server_ && server_->running() ? read_counter() : -1;
  return counter_done_ + (c >= 0 ? c - counter_start_ : 0);
}

RssSeries LiveServer::rss() {
  const std::lock_guard<std::mutex> guard(rss_lock_);
  return rss_;
}

double LiveServer::read_counter() {
  httplib::Client client("127.0.0.1", server_->port());
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(30));
  const auto res = client.Get("/metrics");
  if (!res || res->status != 200) return -1;
  return prometheus_value(res->body, target_.evaluated_counter());
}

}  // namespace prefixd::bench
