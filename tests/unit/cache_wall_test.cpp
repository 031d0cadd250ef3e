// Session walls off the host tier's grid (RequestKey::shared_prefix not a multiple of
// host_segment_tokens) over the FakeEngine: another session reuses the whole shared prefix from
// the host and disk tiers and the checkpoint store, and never a token past the wall. Cells are counted by the engine and verify()
// is clean after each operation.
#include "support/cache_fixture.h"

namespace prefixd::cache {
namespace {

using prefixd::testing::joined;
using prefixd::testing::token_run;

constexpr std::int32_t kWall = 300;  // inside the grid segment [256, 512)

struct CacheWall : prefixd::testing::CacheFixture {
  const std::vector<engine::Token> shared = token_run(0, kWall);
  const std::vector<engine::Token> a = joined(shared, token_run(7, 100));    // alice's, 400 tokens
  const std::vector<engine::Token> b = joined(shared, token_run(100, 100));  // bob's, 400 tokens
  const RequestKey alice{"ns", "alice", {}, {}, kWall};
  const RequestKey bob{"ns", "bob", {}, {}, kWall};

  CacheWall() {
    config.block_size = 16;
    config.host_segment_tokens = 256;
  }

  void check(PrefixCache& cache, const std::string& where) {
    EXPECT_EQ(holder_cells(), PrefixCacheProbe(cache).device_cells()) << where;
    EXPECT_EQ(PrefixCacheProbe(cache).verify(), "") << where;
  }

  // Acquires `prompt` for `key` in slot 0, checks, and releases it; returns the acquisition.
  Acquisition probe(PrefixCache& cache, const RequestKey& key, const std::vector<engine::Token>& prompt,
                    const std::string& where) {
    const Acquisition got = PrefixCacheProbe(cache).acquire(key, prompt, 0);
    check(cache, where);
    cache.release(0);
    check(cache, where + " (released)");
    return got;
  }
};

TEST_F(CacheWall, AnotherSessionReusesTheWholeSharedPrefixFromTheHostTier) {
  auto cache = make(false);
  serve(*cache, alice, a);
  check(*cache, "after alice");
  cache->release_device_cells(1 << 20);
  check(*cache, "after demotion");
  ASSERT_EQ(PrefixCacheProbe(*cache).device_cells(), 0);
  EXPECT_EQ(cache->held(alice, a).host, 400);
  EXPECT_EQ(cache->held(bob, b).host, kWall) << "the segment straddling the wall holds bob's prefix too";

  const Acquisition got = probe(*cache, bob, b, "bob from the host tier");
  EXPECT_EQ(got.reused, kWall);
  EXPECT_EQ(got.tier, Tier::host);
  EXPECT_FALSE(got.in_session);
  EXPECT_EQ(probe(*cache, bob, a, "bob with alice's own tokens").reused, kWall) << "never past alice's wall";
  EXPECT_EQ(cache->held(bob, a).tokens, kWall);
  EXPECT_EQ(probe(*cache, alice, joined(a, token_run(3, 5)), "alice again").reused, 400) << "alice keeps her own";

  // Bob's path, donated and demoted too, still gives nobody else more than the wall.
  serve(*cache, bob, b);
  cache->release_device_cells(1 << 20);
  check(*cache, "after bob");
  const RequestKey carol{"ns", "carol", {}, {}, kWall};
  EXPECT_EQ(probe(*cache, carol, b, "carol with bob's tokens").reused, kWall);
  EXPECT_EQ(probe(*cache, carol, a, "carol with alice's tokens").reused, kWall);
}

TEST_F(CacheWall, AnotherSessionReusesTheWholeSharedPrefixFromDiskAfterARestart) {
  {
    auto cache = make();
    serve(*cache, alice, a);
  }
  engine->clear();  // a restart: the context is empty, the files stay
  auto cache = make();
  EXPECT_EQ(cache->held(bob, b).disk, kWall);
  EXPECT_EQ(cache->held(bob, b).host, 0);
  const Acquisition got = probe(*cache, bob, b, "bob from disk");
  EXPECT_EQ(got.reused, kWall);
  EXPECT_EQ(got.tier, Tier::disk);
  EXPECT_EQ(probe(*cache, bob, a, "bob with alice's tokens").reused, kWall) << "never past alice's wall";
  EXPECT_EQ(probe(*cache, alice, joined(a, token_run(3, 5)), "alice from disk").reused, 400);
}

TEST_F(CacheWall, ACheckpointFamilyCheckpointsAtTheWallForOtherSessions) {
  family = engine::ModelFamily::hybrid;
  auto cache = make(false);
  serve(*cache, alice, a);
  check(*cache, "after alice");
  ASSERT_EQ(cache->reuse_mode(), ReuseMode::checkpoints);
  EXPECT_EQ(cache->held(bob, b).checkpoint, kWall);
  EXPECT_EQ(probe(*cache, bob, b, "bob beside alice's entry").reused, kWall);

  cache->release_device_cells(1 << 20);
  check(*cache, "after demotion");
  EXPECT_EQ(cache->held(bob, b).tokens, kWall);
  EXPECT_EQ(probe(*cache, bob, b, "bob from the host tier").reused, kWall);
  EXPECT_EQ(probe(*cache, bob, a, "bob with alice's tokens").reused, kWall) << "never past alice's wall";
}

}  // namespace
}  // namespace prefixd::cache
