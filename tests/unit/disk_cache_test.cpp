// The prompt cache with a disk tier, over the FakeEngine: a new cache on the same directory (a
// restart) restores token-exactly from disk, host evictions reach the disk when a write-behind was
// dropped, checkpoint families resume from disk checkpoints, and another model's files are foreign.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "support/fake_engine.h"

namespace prefixd::cache {
namespace {

namespace fs = std::filesystem;
using engine::Token;

std::vector<Token> range_tokens(int begin, int count) {
  std::vector<Token> out;
  for (int i = 0; i < count; ++i) out.push_back((begin + i) % 250);
  return out;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("prefixd-disk-cache-" + std::to_string(::getpid()) + "-" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

struct DiskCacheFixture : ::testing::Test {
  TempDir dir;
  std::unique_ptr<engine::FakeEngine> engine = make_engine(engine::ModelFamily::dense);
  CacheConfig config = [this] {
    CacheConfig c;
    c.min_prefix = 4;
    c.block_size = 4;
    c.host_segment_tokens = 8;
    c.device_cells = 4096;
    c.host_capacity_bytes = 1 << 20;
    c.disk_path = dir.path.string();
    return c;
  }();

  static std::unique_ptr<engine::FakeEngine> make_engine(engine::ModelFamily family) {
    return std::make_unique<engine::FakeEngine>(
        engine::FakeEngineOptions{.n_ctx = 4096, .n_batch = 64, .n_seq = 8, .family = family});
  }
  // Slots 0-1, holders 2-6, scratch 7.
  std::unique_ptr<PrefixCache> make(int holders = 5) {
    std::vector<engine::SeqId> ids;
    for (int i = 0; i < holders; ++i) ids.push_back(2 + i);
    return std::make_unique<PrefixCache>(*engine, config, ids, 7);
  }
  void feed(engine::SeqId seq, const std::vector<Token>& tokens, int from) {
    for (int i = from; i < static_cast<int>(tokens.size()); i += engine->batch_size()) {
      std::vector<engine::BatchToken> batch;
      for (int j = i; j < std::min<int>(static_cast<int>(tokens.size()), i + engine->batch_size()); ++j) {
        batch.push_back({tokens[static_cast<size_t>(j)], j, seq, false});
      }
      ASSERT_EQ(engine->decode(batch), engine::DecodeStatus::ok);
    }
  }
  Acquisition serve(PrefixCache& cache, const RequestKey& key, const std::vector<Token>& prompt) {
    const Acquisition got = PrefixCacheProbe(cache).acquire(key, prompt, 0);
    EXPECT_EQ(engine->sequence_tokens(0), std::vector<Token>(prompt.begin(), prompt.begin() + got.reused))
        << "reused cells hold exactly the request's own tokens";
    std::int32_t computed = got.reused;
    // Prefill in chunks that end where the cache plans checkpoints, as the scheduler does.
    while (computed < static_cast<std::int32_t>(prompt.size())) {
      const std::int32_t stop = cache.next_stop(0);
      const std::int32_t end = stop > computed ? stop : static_cast<std::int32_t>(prompt.size());
      std::vector<Token> part(prompt.begin(), prompt.begin() + end);
      feed(0, part, computed);
      computed = end;
      cache.advance(0, computed);
    }
    cache.donate(0, prompt);
    return got;
  }
};

TEST_F(DiskCacheFixture, ANewCacheOnTheSameDirectoryRestoresTokenExactlyFromDisk) {
  const auto a = range_tokens(0, 35);
  {
    auto cache = make();
    serve(*cache, {"ns", "a"}, a);
    PrefixCacheProbe(*cache).flush_disk();
    const DiskStats disk = cache->stats().disk;
    EXPECT_EQ(disk.segments, 5) << "35 tokens: four 8-token segments and a 3-token tail";
    EXPECT_EQ(disk.tokens, 35);
  }
  engine->clear();  // the restart: nothing in the context
  auto cache = make();
  auto longer = a;
  for (Token t : range_tokens(200, 10)) longer.push_back(t);
  const Acquisition got = PrefixCacheProbe(*cache).acquire({"ns", "a"}, longer, 0);
  EXPECT_EQ(got.outcome, Outcome::hit_restore);
  EXPECT_EQ(got.tier, Tier::disk);
  EXPECT_EQ(got.reused, 35);
  EXPECT_EQ(engine->sequence_tokens(0), a);
  cache->release(0);
  const CacheStats stats = cache->stats();
  EXPECT_EQ(stats.disk.hits, 1);
  EXPECT_EQ(stats.disk.promoted_segments, 5);
  EXPECT_EQ(stats.disk.reads, 5);
  EXPECT_EQ(PrefixCacheProbe(*cache).verify(), "");

  // An edit inside the third segment: everything before it comes back, from the host tier now.
  auto edited = a;
  edited[21] = 250;
  const Acquisition edit = PrefixCacheProbe(*cache).acquire({"ns", "a"}, edited, 0);
  EXPECT_EQ(edit.reused, 21);
  EXPECT_EQ(edit.tier, Tier::host);
  EXPECT_EQ(engine->sequence_tokens(0), std::vector<Token>(a.begin(), a.begin() + 21));
  cache->release(0);

  // Another namespace never sees them.
  EXPECT_EQ(PrefixCacheProbe(*cache).acquire({"other", "a"}, longer, 0).reused, 0);
  cache->release(0);
}

TEST_F(DiskCacheFixture, HostEvictionsReachTheDiskWhenTheWriteBehindWasDropped) {
  const auto a = range_tokens(0, 35);
  std::uint64_t a_bytes = 0;
  {
    auto probe = make();
    serve(*probe, {"ns", "a"}, a);
    PrefixCacheProbe(*probe).flush_disk();
    a_bytes = probe->stats().disk.bytes;
    probe->reset();
  }
  engine->clear();
  config.disk_queue_bytes = a_bytes - 1;  // `a`'s whole job does not fit; any four of its segments do
  config.ttl = std::chrono::seconds(0);
  auto cache = make(1);
  serve(*cache, {"ns", "a"}, a);
  EXPECT_EQ(cache->stats().disk.writes_dropped, 1) << "the donation's job is larger than the queue";
  serve(*cache, {"ns", "b"}, range_tokens(120, 20));  // demotes `a` to the host tier; `b` is written
  PrefixCacheProbe(*cache).flush_disk();
  ASSERT_EQ(cache->stats().disk.segments, 3) << "b: two 8-token segments and a 4-token tail";
  ASSERT_EQ(cache->stats().host.entries, 5);
  cache->tick(/*nothing_running=*/false);  // the first tick expires; a TTL of 0: every host segment is evicted, and goes to disk unless it is there
  PrefixCacheProbe(*cache).flush_disk();
  const CacheStats stats = cache->stats();
  EXPECT_EQ(stats.evictions_ttl(), 6) << "five host segments and the device entry";
  const std::int64_t spilled = stats.disk.segments - 3;
  EXPECT_GE(spilled, 4);
  EXPECT_EQ(spilled + (stats.disk.writes_dropped - 1), 5) << "each evicted segment was written or counted dropped";
}

class DiskCacheFamily : public DiskCacheFixture, public ::testing::WithParamInterface<engine::ModelFamily> {};

TEST_P(DiskCacheFamily, CheckpointFamiliesResumeFromDiskCheckpointsAfterARestart) {
  engine = make_engine(GetParam());
  const auto a = range_tokens(0, 35);
  {
    auto cache = make();
    serve(*cache, {"ns", "a"}, a);
    PrefixCacheProbe(*cache).flush_disk();
    EXPECT_GT(cache->stats().disk.checkpoints, 0);
    if (engine::has_attention_cells(engine->model())) {
      EXPECT_EQ(cache->stats().disk.tokens, 35) << "the tail and the checkpoint at its end are two files";
    }
  }
  engine->clear();
  auto cache = make();
  auto longer = a;
  for (Token t : range_tokens(200, 10)) longer.push_back(t);
  const Acquisition got = PrefixCacheProbe(*cache).acquire({"ns", "a"}, longer, 0);
  EXPECT_EQ(got.tier, Tier::disk);
  EXPECT_EQ(got.reused, 35) << "the prompt's end was checkpointed";
  if (engine::has_attention_cells(engine->model())) {
    EXPECT_EQ(engine->sequence_tokens(0), a);
  }
  EXPECT_EQ(cache->stats().disk.promoted_checkpoints, 1);
  cache->release(0);
}

INSTANTIATE_TEST_SUITE_P(Families, DiskCacheFamily,
                         ::testing::Values(engine::ModelFamily::recurrent, engine::ModelFamily::hybrid));

TEST_F(DiskCacheFixture, AnotherModelsFilesAreForeign) {
  {
    auto cache = make();
    serve(*cache, {"ns", "a"}, range_tokens(0, 35));
    PrefixCacheProbe(*cache).flush_disk();
  }
  engine = make_engine(engine::ModelFamily::hybrid);  // another fingerprint
  auto cache = make();
  const DiskStats disk = cache->stats().disk;
  EXPECT_EQ(disk.files, 0);
  EXPECT_EQ(disk.removed[static_cast<size_t>(DiskRemoval::foreign)], 5);
}

}  // namespace
}  // namespace prefixd::cache
