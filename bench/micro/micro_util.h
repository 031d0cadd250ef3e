// Helpers shared by the prompt-cache microbenchmarks: latency samples with their percentiles, and
// feeding a prompt through an engine outside the timed region.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace prefixd::micro {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Per-operation latencies of one benchmark run. Google Benchmark reports means; a cache lookup's
// cost shows in its tail (an eviction or a demotion now and then), so the percentiles are kept too.
class Samples {
 public:
  void add(double seconds) { seconds_.push_back(seconds); }
  bool empty() const { return seconds_.empty(); }

  // Nearest-rank percentile, q in [0, 1].
  double quantile(double q) const {
    if (seconds_.empty()) return 0;
    std::vector<double> sorted = seconds_;
    const auto rank = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
    std::ranges::nth_element(sorted, sorted.begin() + static_cast<std::ptrdiff_t>(rank));
    return sorted[rank];
  }
  double max() const { return seconds_.empty() ? 0 : *std::ranges::max_element(seconds_); }

  // Adds <name>_p50_us, <name>_p99_us and <name>_max_us to the run's counters.
  void report(benchmark::State& state, const std::string& name) const {
    state.counters[name + "_p50_us"] = quantile(0.50) * 1e6;
    state.counters[name + "_p99_us"] = quantile(0.99) * 1e6;
    state.counters[name + "_max_us"] = max() * 1e6;
  }

 private:
  std::vector<double> seconds_;
};

// Computes positions [from, tokens.size()) of `seq` in batches the engine accepts. No logits are
// read: the benchmarks only need the K/V to exist.
inline void compute(engine::Engine& e, engine::SeqId seq, std::span<const engine::Token> tokens, std::int32_t from) {
  const auto n = static_cast<std::int32_t>(tokens.size());
  std::vector<engine::BatchToken> batch;
  for (std::int32_t begin = from; begin < n; begin += e.batch_size()) {
    const std::int32_t end = std::min(n, begin + e.batch_size());
    batch.clear();
    for (std::int32_t pos = begin; pos < end; ++pos) {
      batch.push_back({tokens[static_cast<std::size_t>(pos)], pos, seq, pos == n - 1});
    }
    if (e.decode(batch) != engine::DecodeStatus::ok) {
      throw std::runtime_error("decode failed at position " + std::to_string(begin));
    }
  }
}

}  // namespace prefixd::micro
