// prefixd cache — what a Ticket holds (request_life.h keeps it opaque): a queued request's key,
// prompt and shared-tier lookup. Its own header so that both the face's Ticket (request_life.cpp)
// and the coordinator's admission (prefix_cache_tickets.cpp) see it, and neither includes the
// other's internals. Internal to src/cache.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/block_hash.h"
#include "cache/remote_fetch.h"
#include "cache/request_key.h"
#include "cache/request_life.h"

namespace prefixd::cache {

// Host segments queued requests will restore, each with how many of them wait for it.
using AwaitedSegments = std::unordered_map<Digest, std::int32_t, DigestHash>;

// What a ticket and the shared tier's reader thread share: whom to wake when the lookup completes,
// and when it did (a lookup is judged by whether it completed by its deadline, however late the
// engine thread looks).
class LookupSignal {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LookupSignal(std::function<void()> wake) : wake_(std::move(wake)) {}

  // The reader thread, once the result is in.
  void completed() {
    std::lock_guard lock(mutex_);
    completed_at_ = Clock::now();
    if (wake_) wake_();
  }
  // From now on a completion wakes no one.
  void disconnect() {
    std::lock_guard lock(mutex_);
    wake_ = nullptr;
  }
  // REQUIRES: the lookup is done. One whose completion call has not come yet completed now.
  bool completed_by(Clock::time_point deadline) {
    std::lock_guard lock(mutex_);
    return completed_at_.value_or(Clock::now()) <= deadline;
  }

 private:
  std::mutex mutex_;
  std::function<void()> wake_;
  std::optional<Clock::time_point> completed_at_;
};

struct Ticket::State {
  RequestKey key;
  std::vector<engine::Token> prompt;
  bool uses_cache = true;
  bool spent = false;  // an admit() took a sequence, or abandon() was called
  // Host segments its prompt would restore, counted in the cache's set while it waits.
  std::vector<Digest> awaited;
  std::weak_ptr<AwaitedSegments> awaited_in;
  // The shared-tier lookup, from open() until it is adopted or abandoned; `signal` with it.
  std::shared_ptr<RemoteFetch> lookup;
  std::shared_ptr<LookupSignal> signal;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    drop_lookup();
    stop_awaiting();
  }

  void stop_awaiting() {
    if (const auto set = awaited_in.lock()) {
      for (const Digest& key : awaited) {
        const auto it = set->find(key);
        if (it != set->end() && --it->second <= 0) set->erase(it);
      }
    }
    awaited.clear();
  }

  void drop_lookup() {
    if (signal) signal->disconnect();
    signal.reset();
    lookup.reset();
  }
};

}  // namespace prefixd::cache
