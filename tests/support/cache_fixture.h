// prefixd tests — a prompt cache over the FakeEngine with a disk tier in a temporary directory,
// and a request's life the way the scheduler runs it (acquire, prefill in chunks that end where
// the cache plans checkpoints, donate).
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "support/fake_engine.h"

namespace prefixd::testing {

inline std::vector<engine::Token> token_run(int begin, int count) {
  std::vector<engine::Token> out;
  for (int i = 0; i < count; ++i) out.push_back((begin + i) % 250);
  return out;
}

inline std::vector<engine::Token> joined(std::vector<engine::Token> a, const std::vector<engine::Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct CacheFixture : ::testing::Test {
  static constexpr engine::SeqId kScratch = 7;  // slots 0-1, holders 2-6

  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("prefixd-cache-fixture-" + std::to_string(::getpid()) + "-" +
                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  engine::ModelFamily family = engine::ModelFamily::dense;
  std::unique_ptr<engine::FakeEngine> engine;
  cache::CacheConfig config = [] {
    cache::CacheConfig c;
    c.min_prefix = 4;
    c.block_size = 4;
    c.host_segment_tokens = 8;
    c.device_cells = 4096;
    c.host_capacity_bytes = 1 << 20;
    c.checkpoint_every = 0;
    return c;
  }();

  CacheFixture() { std::filesystem::remove_all(dir); }
  ~CacheFixture() override { std::filesystem::remove_all(dir); }

  // A cache with a disk tier under `dir` (none when `disk` is false) over a new engine of `family`.
  std::unique_ptr<cache::PrefixCache> make(bool disk = true) {
    if (!engine) {
      engine = std::make_unique<engine::FakeEngine>(
          engine::FakeEngineOptions{.n_ctx = 4096, .n_batch = 16, .n_seq = 8, .family = family});
    }
    cache::CacheConfig c = config;
    c.disk_path = disk ? (dir / "disk").string() : "";
    return std::make_unique<cache::PrefixCache>(*engine, c, std::vector<engine::SeqId>{2, 3, 4, 5, 6}, kScratch);
  }

  cache::Acquisition serve(cache::PrefixCache& cache, const cache::RequestKey& key,
                           const std::vector<engine::Token>& prompt, engine::SeqId seq = 0) {
    const cache::Acquisition got = cache::PrefixCacheProbe(cache).acquire(key, prompt, seq);
    std::int32_t computed = got.reused;
    const auto n = static_cast<std::int32_t>(prompt.size());
    while (computed < n) {
      std::int32_t end = std::min(n, computed + engine->batch_size());
      if (const std::int32_t stop = cache.next_stop(seq); stop > computed) end = std::min(end, stop);
      std::vector<engine::BatchToken> batch;
      for (int j = computed; j < end; ++j) batch.push_back({prompt[static_cast<size_t>(j)], j, seq, false});
      EXPECT_EQ(engine->decode(batch), engine::DecodeStatus::ok);
      computed = end;
      cache.advance(seq, computed);
    }
    cache.donate(seq, prompt);
    return got;
  }

  // Cells the holders keep, counted by the engine.
  std::int64_t holder_cells() const {
    return engine->count_cells([](const std::set<engine::SeqId>& owners) {
      return std::ranges::any_of(owners, [](engine::SeqId s) { return s >= 2 && s <= 6; });
    });
  }
  // Every byte the cache's stats say it holds, in all tiers.
  static std::uint64_t held_bytes(const cache::CacheStats& s) {
    return s.bytes() + s.disk.bytes;
  }
  std::int64_t files_on_disk() const {
    std::int64_t files = 0;
    if (!std::filesystem::exists(dir / "disk" / "kv")) return 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "disk" / "kv")) {
      files += entry.is_regular_file() ? 1 : 0;
    }
    return files;
  }
};

}  // namespace prefixd::testing
