#include "router/upstream.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace prefixd::router {

UpstreamCall::UpstreamCall(const BackendAddress& address, UpstreamRequest request, UpstreamTimeouts timeouts)
    : client_(std::make_unique<httplib::Client>(address.host, address.port)) {
  client_->set_connection_timeout(timeouts.connect);
  client_->set_read_timeout(timeouts.read);
  client_->set_write_timeout(std::chrono::seconds(60));
  client_->set_keep_alive(false);
  thread_ = std::jthread([this, request = std::move(request)]() mutable { run(std::move(request)); });
}

UpstreamCall::~UpstreamCall() {
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  changed_.notify_all();
  client_->stop();  // a read blocked on a silent backend returns now
  if (thread_.joinable()) thread_.join();
}

void UpstreamCall::run(UpstreamRequest request) {
  httplib::Request req;
  req.method = request.method;
  req.path = request.path;
  for (auto& [name, value] : request.headers) req.set_header(name, value);
  if (request.method == "POST") {
    req.body = std::move(request.body);
    req.set_header("Content-Type", request.content_type);
  }
  req.response_handler = [this](const httplib::Response& res) {
    std::lock_guard lock(mutex_);
    answered_ = true;
    status_ = res.status;
    content_type_ = res.get_header_value("Content-Type");
    return !cancelled_;
  };
  req.content_receiver = [this](const char* data, std::size_t length, std::size_t, std::size_t) {
    {
      std::lock_guard lock(mutex_);
      if (cancelled_) return false;
      chunks_.emplace_back(data, length);
      got_body_ = true;
    }
    changed_.notify_all();
    return true;
  };
  const httplib::Result result = client_->send(req);
  {
    std::lock_guard lock(mutex_);
    if (!result) {
      error_ = httplib::to_string(result.error());
    } else {
      answered_ = true;
      status_ = result->status;
      if (content_type_.empty()) content_type_ = result->get_header_value("Content-Type");
      if (!got_body_ && !result->body.empty()) {
        chunks_.push_back(result->body);
        got_body_ = true;
      }
    }
    done_ = true;
  }
  changed_.notify_all();
}

UpstreamCall::Head UpstreamCall::wait_head() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return done_ || got_body_; });
  Head head;
  head.answered = answered_;
  head.status = status_;
  head.content_type = content_type_;
  if (!answered_) head.error = error_.empty() ? "no answer" : error_;
  if (answered_ && !got_body_ && !error_.empty()) {
    head.failed_before_body = true;
    head.error = error_;
  }
  return head;
}

std::optional<std::string> UpstreamCall::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return done_ || !chunks_.empty(); });
  if (chunks_.empty()) return std::nullopt;
  std::string chunk = std::move(chunks_.front());
  chunks_.pop_front();
  return chunk;
}

std::string UpstreamCall::failure() const {
  std::lock_guard lock(mutex_);
  return error_;
}

std::string UpstreamCall::read_all() {
  std::string out;
  while (auto chunk = next()) out += *chunk;
  return out;
}

std::string relay_event_stream(UpstreamCall& call, http::ChunkWriter& out, std::string_view who) {
  while (auto chunk = call.next()) {
    if (!out.write(*chunk)) return {};
  }
  std::string failure = call.failure();
  if (!failure.empty()) {
    const nlohmann::ordered_json event = {
        {"error", {{"message", std::string(who) + " failed mid-stream: " + failure},
                   {"type", "server_error"}, {"param", nullptr}, {"code", "upstream_failed"}}}};
    out.write("data: " + event.dump() + "\n\n");
  }
  return failure;
}

}  // namespace prefixd::router
