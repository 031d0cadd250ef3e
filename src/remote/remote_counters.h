// prefixd remote — what the remote store did, as counters the hot path only increments.
#pragma once

#include <atomic>
#include <cstdint>

namespace prefixd::remote {

// A consistent-enough snapshot: each field is read atomically, not all of them at one instant.
struct RemoteCounters {
  std::uint64_t hits = 0;           // GETs that returned a value
  std::uint64_t misses = 0;         // GETs that returned nothing (absent key, or the node failed)
  std::uint64_t errors = 0;         // commands that failed: connection, timeout, server error
  std::uint64_t bytes_read = 0;     // value bytes returned by GETs
  std::uint64_t bytes_written = 0;  // value bytes sent by successful SETs
  std::uint64_t redirections = 0;   // MOVED and ASK replies followed
  std::uint64_t connects = 0;       // connection attempts, successful or not (backoff limits them)
  std::uint64_t latency_us_sum = 0; // wall time of get/get_many/set/del calls, summed
  std::uint64_t latency_count = 0;  // how many calls latency_us_sum covers
};

// Thread-safe: any thread may add, any thread may take a snapshot.
class RemoteCounterSink {
 public:
  void add_hits(std::uint64_t n) { hits_.fetch_add(n, std::memory_order_relaxed); }
  void add_misses(std::uint64_t n) { misses_.fetch_add(n, std::memory_order_relaxed); }
  void add_errors(std::uint64_t n) { errors_.fetch_add(n, std::memory_order_relaxed); }
  void add_bytes_read(std::uint64_t n) { bytes_read_.fetch_add(n, std::memory_order_relaxed); }
  void add_bytes_written(std::uint64_t n) { bytes_written_.fetch_add(n, std::memory_order_relaxed); }
  void add_redirection() { redirections_.fetch_add(1, std::memory_order_relaxed); }
  void add_connect() { connects_.fetch_add(1, std::memory_order_relaxed); }
  void add_latency_us(std::uint64_t us) {
    latency_us_sum_.fetch_add(us, std::memory_order_relaxed);
    latency_count_.fetch_add(1, std::memory_order_relaxed);
  }

  RemoteCounters snapshot() const {
    const auto read = [](const std::atomic<std::uint64_t>& counter) { return counter.load(std::memory_order_relaxed); };
    return RemoteCounters{read(hits_),          read(misses_),       read(errors_),
                          read(bytes_read_),    read(bytes_written_), read(redirections_),
                          read(connects_),      read(latency_us_sum_), read(latency_count_)};
  }

 private:
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, errors_{0}, bytes_read_{0}, bytes_written_{0}, redirections_{0},
      connects_{0}, latency_us_sum_{0}, latency_count_{0};
};

}  // namespace prefixd::remote
