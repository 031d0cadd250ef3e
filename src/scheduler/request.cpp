#include "scheduler/request.h"

namespace prefixd::scheduler {

cache::RequestKey cache_key(const CacheOptions& options) {
  return cache::RequestKey{.namespace_digest = options.namespace_digest,
                           .session = options.session_key,
                           .boundaries = options.boundaries,
                           .scope = options.scope,
                           .shared_prefix = options.shared_prefix,
                           .retain = options.retain,
                           .unbroken = options.unbroken,
                           .shift_reuse_min = options.shift_reuse_min,
                           .adapter = options.adapter_label};
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "error";
}

std::optional<StreamEvent> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return std::nullopt;
  StreamEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

void RequestStream::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool RequestStream::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

void RequestStream::push(StreamEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_all();
}

}  // namespace prefixd::scheduler
