#include "scheduler/remote_waits.h"

#include <algorithm>
#include <utility>

namespace prefixd::scheduler {

RemoteWaits::RemoteWaits(cache::PrefixCache& cache, std::function<void()> wake) : cache_(cache) {
  signal_->wake = std::move(wake);
}

RemoteWaits::~RemoteWaits() { disconnect(); }

void RemoteWaits::disconnect() {
  std::lock_guard lock(signal_->mutex);
  signal_->wake = nullptr;
}

void RemoteWaits::plan(std::deque<Queued>& queue, double seconds_per_token) {
  for (auto it = queue.begin(); it != queue.end();) {
    if (it->remote_planned || !it->request.cache.enabled || it->stream->cancelled()) {
      ++it;
      continue;
    }
    it->remote_planned = true;
    it->fetch = cache_.fetch_remote(cache_key(it->request.cache), it->request.prompt, seconds_per_token,
                                    [signal = signal_] {
                                      std::lock_guard lock(signal->mutex);
                                      if (signal->wake) signal->wake();
                                    });
    if (!it->fetch) {
      ++it;
      continue;
    }
    waiting_.push_back(std::move(*it));
    it = queue.erase(it);
  }
}

void RemoteWaits::collect(std::deque<Queued>& queue) {
  const auto now = Clock::now();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const bool done = it->fetch->done();
    if (!done && now < it->fetch->deadline() && !it->stream->cancelled()) {
      ++it;
      continue;
    }
    if (!done) {
      cache_.abandon_remote();
      it->fetch.reset();
    }
    const auto at = std::ranges::find_if(queue, [&](const Queued& q) { return q.id > it->id; });
    queue.insert(at, std::move(*it));
    it = waiting_.erase(it);
  }
}

Clock::duration RemoteWaits::wait_limit(Clock::duration limit) const {
  const auto now = Clock::now();
  for (const Queued& q : waiting_) {
    limit = std::min<Clock::duration>(limit, std::max(q.fetch->deadline() - now, Clock::duration::zero()));
  }
  return limit;
}

}  // namespace prefixd::scheduler
