#include "cli/memory_return.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <spdlog/spdlog.h>

namespace prefixd::cli {
namespace {

// The resident set in MiB (/proc/self/statm), for the debug log.
double resident_mib() {
  std::ifstream statm("/proc/self/statm");
  long size = 0;
  long resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

}  // namespace

void configure_heap(int arenas) {
  if (mallopt(M_ARENA_MAX, std::max(1, arenas)) != 1) {
    spdlog::warn("could not limit the allocator's arenas: freed memory may stay resident in many of them");
  }
}

void fix_mmap_threshold() {
  constexpr int kLargeBlockBytes = 128 << 10;  // glibc's own initial threshold
  if (mallopt(M_MMAP_THRESHOLD, kLargeBlockBytes) != 1) {
    spdlog::warn("could not fix the allocator's mmap threshold: memory freed after large requests may stay resident");
  }
}

HeapTrimmer::HeapTrimmer(std::size_t large_body_bytes, std::chrono::milliseconds min_interval)
    : large_body_bytes_(large_body_bytes),
      min_interval_(min_interval),
      thread_([this](const std::stop_token& stop) { run(stop); }) {}

HeapTrimmer::~HeapTrimmer() {
  thread_.request_stop();  // wakes the wait below: it is bound to the thread's stop token
}

void HeapTrimmer::request_began(std::size_t body_bytes) {
  if (body_bytes < large_body_bytes_) return;
  std::lock_guard lock(mutex_);
  ++large_in_flight_;
}

void HeapTrimmer::request_ended(std::size_t body_bytes) {
  if (body_bytes < large_body_bytes_) return;
  {
    std::lock_guard lock(mutex_);
    --large_in_flight_;
    pending_ = true;
  }
  wake_.notify_one();
}

void HeapTrimmer::run(const std::stop_token& stop) {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (!wake_.wait(lock, stop, [this] { return pending_ && large_in_flight_ == 0; })) return;
      pending_ = false;
    }
    const auto began = std::chrono::steady_clock::now();
    const double before = resident_mib();
    malloc_trim(0);
    const auto took = std::chrono::steady_clock::now() - began;
    spdlog::debug("heap: trimmed after large requests, resident {:.1f} -> {:.1f} MiB in {:.1f} ms ({:.1f} MiB allocated)",
                  before, resident_mib(), std::chrono::duration<double, std::milli>(took).count(),
                  static_cast<double>(mallinfo2().uordblks) / (1 << 20));
    // Requests that end meanwhile set pending_ again and get the next trim, after the pause.
    std::unique_lock lock(mutex_);
    const auto pause = std::max<std::chrono::steady_clock::duration>(min_interval_, 9 * took);
    wake_.wait_until(lock, stop, began + took + pause, [] { return false; });
    if (stop.stop_requested()) return;
  }
}

}  // namespace prefixd::cli
