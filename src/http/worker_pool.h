// prefixd http — the threads that run request handlers.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace prefixd::http {

// A fixed set of threads taking tasks in the order they were posted. The destructor lets running
// tasks finish, drops those not started and joins.
class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void post(std::move_only_function<void()> task);

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::move_only_function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::jthread> threads_;  // last: started after, and joined before, the rest
};

}  // namespace prefixd::http
