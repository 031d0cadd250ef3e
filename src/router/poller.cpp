#include "router/poller.h"

#include <algorithm>
#include <format>

#include <httplib.h>
#include <spdlog/spdlog.h>

namespace prefixd::router {

namespace {

httplib::Headers auth_headers(const std::string& key) {
  if (key.empty()) return {};
  return {{"Authorization", "Bearer " + key}};
}

std::unique_ptr<httplib::Client> client_for(const Backend& backend, std::chrono::milliseconds timeout) {
  auto client = std::make_unique<httplib::Client>(backend.address().host, backend.address().port);
  client->set_connection_timeout(std::min<std::chrono::milliseconds>(timeout, std::chrono::milliseconds(2000)));
  client->set_read_timeout(timeout);
  client->set_write_timeout(timeout);
  return client;
}

}  // namespace

BackendPoller::BackendPoller(std::span<const std::unique_ptr<Backend>> backends, PollerOptions options)
    : backends_(backends), options_(std::move(options)) {
  if (options_.kv_events && options_.summary_interval.count() > 0) {
    subscriber_ = std::make_unique<events::KvEventSubscriber>(
        [this](std::size_t index, const events::WireBatch& batch) { backends_[index]->apply_events(batch); },
        [this](std::size_t index) {
          spdlog::warn("backend {}: KV events missed that its replay no longer holds; reading its block list",
                       backends_[index]->url());
          backends_[index]->resync();
        });
  }
  for (std::size_t i = 0; i < backends_.size(); ++i) {
    poll_health(*backends_[i]);
    if (backends_[i]->healthy() && options_.summary_interval.count() > 0) poll_summary(i);
  }
  thread_ = std::jthread([this](const std::stop_token& stop) { loop(stop); });
}

BackendPoller::~BackendPoller() { stop(); }

void BackendPoller::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  wake_.notify_all();
  thread_.join();
  subscriber_.reset();
}

void BackendPoller::poll_health(Backend& backend) const {
  // A check may take as long as the interval, at least a second: a busy CPU backend is slow, not down.
  const auto timeout = std::max<std::chrono::milliseconds>(options_.health_interval, std::chrono::milliseconds(1000));
  auto client = client_for(backend, timeout);
  const auto res = client->Get("/health");
  const bool ok = res && res->status == 200;
  if (ok != backend.healthy()) {
    spdlog::info("backend {} is {}{}", backend.url(), ok ? "healthy" : "drained",
                 ok ? "" : res ? std::format(" (health answered {})", res->status)
                               : std::format(" ({})", httplib::to_string(res.error())));
  }
  backend.set_healthy(ok);
}

void BackendPoller::poll_summary(std::size_t index) {
  Backend& backend = *backends_[index];
  auto client = client_for(backend, std::chrono::milliseconds(10'000));
  std::string path = "/v1/cache/summary";
  if (backend.following_events() && !backend.needs_blocks()) {
    path += "?blocks=false";
  } else if (const auto version = backend.summary_version()) {
    path += "?since=" + std::to_string(*version);
  }
  const auto res = client->Get(path, auth_headers(options_.api_key));
  if (!res) return;  // the health check decides about the backend
  if (res->status != 200) {
    spdlog::debug("backend {}: GET {} answered {}", backend.url(), path, res->status);
    return;
  }
  const auto body = nlohmann::json::parse(res->body, nullptr, false);
  if (!backend.apply_summary(body) && !body.is_discarded() && body.value("unchanged", false)) {
    // Another process answered with our version number: fetch the whole list now.
    poll_summary(index);
    return;
  }
  if (subscriber_ == nullptr) return;
  if (backend.following_events()) {
    if (backend.take_restart()) {
      spdlog::info("backend {}: restarted; following its KV events from the start", backend.url());
      subscriber_->restart(index);
    }
  } else if (const auto source = backend.events_source()) {
    spdlog::info("backend {}: following its KV events at {}", backend.url(), source->endpoint);
    backend.take_restart();
    backend.follow_events();
    subscriber_->add(index, *source);
  }
}

void BackendPoller::loop(const std::stop_token& stop) {
  using Clock = std::chrono::steady_clock;
  auto next_health = Clock::now() + options_.health_interval;
  auto next_summary = Clock::now() + options_.summary_interval;
  const bool summaries = options_.summary_interval.count() > 0;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lock(mutex_);
      const auto until = summaries ? std::min(next_health, next_summary) : next_health;
      wake_.wait_until(lock, stop, until, [] { return false; });
    }
    if (stop.stop_requested()) return;
    const auto now = Clock::now();
    if (now >= next_health) {
      for (const auto& backend : backends_) poll_health(*backend);
      next_health = Clock::now() + options_.health_interval;
    }
    if (summaries && now >= next_summary) {
      for (std::size_t i = 0; i < backends_.size(); ++i) {
        if (backends_[i]->healthy()) poll_summary(i);
      }
      next_summary = Clock::now() + options_.summary_interval;
    }
  }
}

}  // namespace prefixd::router
