// The holdings summary (PrefixCache::summary) over the FakeEngine: exactly the block chain hashes
// of the prompts served, whichever tier holds them (device, host, disk), under session walls too;
// a version that moves only when the set does; nothing after a reset.
#include <set>

#include "support/cache_fixture.h"

namespace prefixd::cache {
namespace {

using prefixd::testing::joined;
using prefixd::testing::token_run;

struct CacheSummaryTest : prefixd::testing::CacheFixture {
  const std::vector<engine::Token> shared = token_run(0, 64);
  const std::vector<engine::Token> a = joined(shared, token_run(100, 40));  // 104 tokens: 26 blocks of 4
  const std::vector<engine::Token> b = joined(shared, token_run(150, 50));  // 114 tokens: 28 blocks
  const RequestKey key{"ns", "s"};

  static std::set<Digest> as_set(const std::vector<Digest>& blocks) { return {blocks.begin(), blocks.end()}; }
  static std::set<Digest> united(const std::vector<Digest>& x, const std::vector<Digest>& y) {
    std::set<Digest> out = as_set(x);
    out.insert(y.begin(), y.end());
    return out;
  }
};

TEST_F(CacheSummaryTest, ListsExactlyTheChainsOfWhatEveryTierHolds) {
  auto cache = make();
  EXPECT_TRUE(cache->summary().blocks.empty());
  serve(*cache, key, a);
  const std::vector<Digest> chain_a = cache->chain_of(key, a);
  ASSERT_EQ(chain_a.size(), 26u);
  EXPECT_EQ(as_set(cache->summary().blocks), as_set(chain_a)) << "device entry (and its disk copy)";

  cache->release_device_cells(1 << 20);
  ASSERT_EQ(PrefixCacheProbe(*cache).device_cells(), 0);
  EXPECT_EQ(as_set(cache->summary().blocks), as_set(chain_a)) << "host segments";

  serve(*cache, key, b);
  const std::vector<Digest> chain_b = cache->chain_of(key, b);
  EXPECT_EQ(as_set(cache->summary().blocks), united(chain_a, chain_b));
  EXPECT_EQ(united(chain_a, chain_b).size(), 26u + 28u - 16u) << "the shared 64 tokens are listed once";
}

TEST_F(CacheSummaryTest, DiskFilesAloneAreListedAfterARestart) {
  std::vector<Digest> chain_a;
  {
    auto cache = make();
    serve(*cache, key, a);
    PrefixCacheProbe(*cache).flush_disk();
    chain_a = cache->chain_of(key, a);
  }
  engine.reset();
  auto reopened = make();
  ASSERT_EQ(PrefixCacheProbe(*reopened).device_cells(), 0);
  ASSERT_EQ(reopened->stats().host.entries, 0);
  EXPECT_EQ(as_set(reopened->summary().blocks), as_set(chain_a));
}

TEST_F(CacheSummaryTest, AVersionMovesOnlyWithTheSetAndAResetEmptiesIt) {
  auto cache = make(false);
  const CacheSummary empty = cache->summary();
  serve(*cache, key, a);
  const CacheSummary full = cache->summary();
  EXPECT_NE(full.version, empty.version);
  const CacheSummary again = cache->summary(full.version);
  EXPECT_TRUE(again.unchanged);
  EXPECT_TRUE(again.blocks.empty());
  EXPECT_EQ(again.version, full.version);
  EXPECT_EQ(cache->summary(full.version - 1).blocks.size(), full.blocks.size());

  cache->release_device_cells(1 << 20);  // the same prefix, now in the host tier
  EXPECT_TRUE(cache->summary(full.version).unchanged) << "moving between tiers changes nothing listed";

  cache->reset();
  const CacheSummary reset = cache->summary(full.version);
  EXPECT_FALSE(reset.unchanged);
  EXPECT_TRUE(reset.blocks.empty());
}

TEST_F(CacheSummaryTest, ASessionsForkedChainIsListedInEveryTier) {
  auto cache = make(false);
  // The wall at 30 lies inside block [28, 32) and inside host segment [24, 32).
  const RequestKey alice{"ns", "alice", {}, {}, 30};
  const RequestKey bob{"ns", "bob", {}, {}, 30};
  serve(*cache, alice, a);
  const std::vector<Digest> chain = cache->chain_of(alice, a);
  const std::vector<Digest> bobs = cache->chain_of(bob, a);
  ASSERT_EQ(std::vector<Digest>(chain.begin(), chain.begin() + 7), std::vector<Digest>(bobs.begin(), bobs.begin() + 7))
      << "blocks wholly before the wall are the namespace's";
  EXPECT_NE(chain[7], bobs[7]);
  EXPECT_EQ(as_set(cache->summary().blocks), as_set(chain));
  cache->release_device_cells(1 << 20);
  const std::set<Digest> host = as_set(cache->summary().blocks);
  for (std::size_t i = 0; i < chain.size(); ++i) EXPECT_TRUE(host.contains(chain[i])) << "block " << i;
  EXPECT_FALSE(host.contains(bobs[7]));
}

}  // namespace
}  // namespace prefixd::cache
