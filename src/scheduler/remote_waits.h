// prefixd scheduler — requests waiting for their shared-tier lookup before admission.
//
// A queued request whose prompt could gain from the shared tier (the cache plans the lookup:
// PrefixCache::fetch_remote) leaves the queue and waits here, holding no sequence, until its lookup
// is done, its deadline passes, or its client goes away; then it goes back to the queue in arrival
// order and is admitted with the fetch (or without it, counted as abandoned). The lookup runs on
// the shared tier's reader thread, which wakes the scheduler through `wake` when one completes.
// REQUIRES: every method is called from the scheduler thread.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cache/prefix_cache.h"
#include "scheduler/scheduler_internal.h"

namespace prefixd::scheduler {

class RemoteWaits {
 public:
  // `wake` may be called on the reader thread, until disconnect().
  RemoteWaits(cache::PrefixCache& cache, std::function<void()> wake);
  ~RemoteWaits();
  RemoteWaits(const RemoteWaits&) = delete;
  RemoteWaits& operator=(const RemoteWaits&) = delete;

  // Starts the lookup of each newly queued request of `queue` that could gain from it and moves
  // those requests here. `seconds_per_token`: what computing a prompt token costs now.
  void plan(std::deque<Queued>& queue, double seconds_per_token);
  // Returns to `queue`, in arrival order, the requests whose lookup is done, past its deadline, or
  // whose client went away.
  void collect(std::deque<Queued>& queue);
  // How long the scheduler may sleep before a lookup's deadline passes (at most `limit`).
  Clock::duration wait_limit(Clock::duration limit) const;
  std::size_t size() const { return waiting_.size(); }
  std::vector<Queued> take_all() { return std::exchange(waiting_, {}); }
  // From now on a completed lookup wakes no one (the scheduler is going; the reader thread may
  // outlive it, since the cache owns that thread).
  void disconnect();

 private:
  struct Signal {
    std::mutex mutex;
    std::function<void()> wake;
  };

  cache::PrefixCache& cache_;
  std::shared_ptr<Signal> signal_ = std::make_shared<Signal>();
  std::vector<Queued> waiting_;
};

}  // namespace prefixd::scheduler
