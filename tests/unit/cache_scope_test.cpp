// Scopes and session walls in the prompt cache, over the FakeEngine: what each scope is counted,
// what a scope reset removes from every tier, and what session isolation lets one session reuse of
// another's entries in each tier (device, in flight, host, disk).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include "cache/block_hash.h"
#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "cache/radix_tree.h"
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

std::vector<Token> concat(std::vector<Token> a, const std::vector<Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void feed(engine::FakeEngine& e, engine::SeqId seq, const std::vector<Token>& tokens, int from, int to) {
  for (int i = from; i < to; i += e.batch_size()) {
    std::vector<engine::BatchToken> batch;
    for (int j = i; j < std::min(to, i + e.batch_size()); ++j) batch.push_back({tokens[static_cast<size_t>(j)], j, seq, false});
    ASSERT_EQ(e.decode(batch), engine::DecodeStatus::ok);
  }
}

const ScopeId kAlpha = scope_id("alpha");
const ScopeId kBeta = scope_id("beta");

struct ScopeFixture : ::testing::Test {
  fs::path disk = fs::temp_directory_path() / ("prefixd-scope-test-" + std::to_string(::getpid()));
  engine::FakeEngine engine{{.n_ctx = 4096, .n_batch = 64, .n_seq = 8}};
  CacheConfig config = [] {
    CacheConfig c;
    c.min_prefix = 4;
    c.block_size = 4;
    c.host_segment_tokens = 8;
    c.device_cells = 4096;
    c.host_capacity_bytes = 1 << 20;
    return c;
  }();
  ScopeFixture() { fs::remove_all(disk); }
  ~ScopeFixture() override { fs::remove_all(disk); }

  // Slots 0-1, holders 2-6, scratch 7.
  std::unique_ptr<PrefixCache> make() {
    return std::make_unique<PrefixCache>(engine, config, std::vector<engine::SeqId>{2, 3, 4, 5, 6}, 7);
  }
  Acquisition serve(PrefixCache& cache, const RequestKey& key, const std::vector<Token>& prompt) {
    const Acquisition got = PrefixCacheProbe(cache).acquire(key, prompt, 0);
    EXPECT_EQ(engine.sequence_tokens(0), std::vector<Token>(prompt.begin(), prompt.begin() + got.reused));
    feed(engine, 0, prompt, got.reused, static_cast<int>(prompt.size()));
    cache.advance(0, static_cast<std::int32_t>(prompt.size()));
    cache.donate(0, prompt);
    EXPECT_EQ(PrefixCacheProbe(cache).verify(), "");
    return got;
  }
};

TEST(LineageChain, AForkChangesEveryAddressThatCoversItAndNothingBefore) {
  BlockHasher hasher(CacheConfig{}.hash, 4);
  const auto tokens = range_tokens(0, 24);
  const std::vector<Digest> plain = hasher.chain("ns", tokens);
  const Lineage alice{"ns", 10, scope_id("alice")};
  const Lineage bob{"ns", 10, scope_id("bob")};
  const std::vector<Digest> a = hasher.chain(alice, tokens);
  const std::vector<Digest> b = hasher.chain(bob, tokens);
  ASSERT_EQ(a.size(), 6u);
  // Blocks [0,4) and [4,8) end before position 10: the namespace's own addresses.
  EXPECT_EQ(a[0], plain[0]);
  EXPECT_EQ(a[1], plain[1]);
  // The block [8,12) covers position 10: it and all later ones differ per salt.
  for (size_t i = 2; i < a.size(); ++i) {
    EXPECT_NE(a[i], plain[i]) << i;
    EXPECT_NE(a[i], b[i]) << i;
  }
  // A span's parent is forked exactly when the span covers the fork.
  EXPECT_EQ(hasher.parent(alice, a, 4, 10), plain[0]);
  EXPECT_NE(hasher.parent(alice, a, 4, 11), plain[0]);
  EXPECT_NE(hasher.parent(alice, a, 8, 16), hasher.parent(bob, b, 8, 16));
  EXPECT_EQ(hasher.parent(alice, a, 12, 16), a[2]) << "past the fork the chain itself is salted";
  EXPECT_EQ(hasher.chain(Lineage{"ns"}, tokens), plain) << "no fork: the plain chain";
}

TEST(RadixTreeReach, AnotherSessionsMatchIsCappedAndOwnEntriesNeedASession) {
  RadixTree tree;
  tree.insert(1, range_tokens(0, 30), "alice");
  const auto query = range_tokens(0, 30);
  EXPECT_EQ(tree.match(query, "bob").length, 30);
  const RadixTree::Match capped = tree.match(query, "bob", Reach{.others = 12});
  EXPECT_EQ(capped.length, 12);
  EXPECT_EQ(capped.entry, 1u);
  EXPECT_FALSE(capped.in_session);
  EXPECT_EQ(tree.match(query, "alice", Reach{.others = 12}).length, 30) << "its own session's entry, whole";
  EXPECT_EQ(tree.match(query, "alice", Reach{.others = 12, .own = false}).length, 12);
  EXPECT_EQ(tree.match(query, "bob", Reach{.others = 0}).length, 0);
  EXPECT_EQ(tree.match_whole(query, "bob", Reach{.others = 29}).length, 0) << "a whole entry longer than the reach";
  EXPECT_EQ(tree.match_whole(query, "bob", Reach{.others = 30}).length, 30);
}

TEST_F(ScopeFixture, EachScopeIsCountedItsOwnRequestsAndHoldings) {
  auto cache = make();
  const auto prompt = range_tokens(0, 40);
  const RequestKey alpha{"ns-alpha", "s", {}, kAlpha};
  const RequestKey beta{"ns-beta", "s", {}, kBeta};
  EXPECT_EQ(serve(*cache, alpha, prompt).outcome, Outcome::cold);
  EXPECT_EQ(serve(*cache, alpha, prompt).outcome, Outcome::hit_extend);
  EXPECT_EQ(serve(*cache, beta, prompt).outcome, Outcome::cold) << "another namespace never hits";
  // A request of beta that does not use the cache: admitted, counted as bypass.
  Ticket bypass = cache->open_bypass(kBeta);
  EXPECT_EQ(cache->admit(bypass, 0, Room{.need = 41}).acquisition.outcome, Outcome::bypass);
  const CacheStats stats = cache->stats();
  ASSERT_EQ(stats.scopes.size(), 2u);
  const ScopeStats& a = stats.scopes.at(kAlpha);
  const ScopeStats& b = stats.scopes.at(kBeta);
  EXPECT_EQ(a.outcomes[static_cast<size_t>(Outcome::cold)], 1);
  EXPECT_EQ(a.outcomes[static_cast<size_t>(Outcome::hit_extend)], 1);
  EXPECT_EQ(a.hits, 1);
  EXPECT_EQ(a.tokens_reused, 39);
  EXPECT_EQ(b.outcomes[static_cast<size_t>(Outcome::cold)], 1);
  EXPECT_EQ(b.outcomes[static_cast<size_t>(Outcome::bypass)], 1);
  EXPECT_EQ(b.hits, 0);
  EXPECT_EQ(a.device_entries, 1);
  EXPECT_EQ(b.device_entries, 1);
  EXPECT_EQ(a.device_cells, 40);
  EXPECT_EQ(b.device_cells, 40);
  EXPECT_EQ(a.device_cells + b.device_cells, stats.device.cells);
  EXPECT_EQ(a.hits + b.hits, stats.requests.hits);
}

TEST_F(ScopeFixture, AScopeResetEmptiesThatScopeInEveryTierAndNoOther) {
  config.disk_path = disk.string();
  auto cache = make();
  const auto prompt = range_tokens(0, 40);
  const RequestKey alpha{"ns-alpha", "s", {}, kAlpha};
  const RequestKey beta{"ns-beta", "s", {}, kBeta};
  const auto other = range_tokens(60, 40);
  serve(*cache, alpha, prompt);
  serve(*cache, beta, prompt);
  // Alpha's first entry goes to the host tier; a second one stays on the device.
  cache->release_device_cells(1000);
  serve(*cache, alpha, other);
  PrefixCacheProbe(*cache).flush_disk();
  CacheStats before = cache->stats();
  ASSERT_GT(before.scopes.at(kAlpha).host.entries, 0);
  ASSERT_GT(before.scopes.at(kBeta).host.entries, 0);
  ASSERT_EQ(before.scopes.at(kAlpha).device_entries, 1);
  ASSERT_GT(before.scopes.at(kAlpha).disk.entries, 0);
  ASSERT_GT(before.scopes.at(kBeta).disk.entries, 0);
  const ScopeStats beta_before = before.scopes.at(kBeta);

  const ResetReport report = cache->reset_scope(kAlpha);
  const ScopeStats& a = before.scopes.at(kAlpha);
  EXPECT_EQ(report.entries, a.device_entries + a.host.entries + a.checkpoints.entries + a.disk.entries);
  EXPECT_EQ(report.bytes, a.device_bytes + a.host.bytes + a.checkpoints.bytes + a.disk.bytes);
  const CacheStats after = cache->stats();
  const ScopeStats& emptied = after.scopes.at(kAlpha);  // its counters stay
  EXPECT_EQ(emptied.device_entries + emptied.host.entries + emptied.checkpoints.entries + emptied.disk.entries, 0);
  EXPECT_EQ(emptied.outcomes[static_cast<size_t>(Outcome::cold)], 2) << "counters are not holdings";
  const ScopeStats& b = after.scopes.at(kBeta);
  EXPECT_EQ(b.host.entries, beta_before.host.entries);
  EXPECT_EQ(b.disk.entries, beta_before.disk.entries);
  EXPECT_EQ(b.disk.bytes, beta_before.disk.bytes);
  EXPECT_EQ(PrefixCacheProbe(*cache).verify(), "");

  EXPECT_EQ(serve(*cache, alpha, prompt).outcome, Outcome::cold);
  EXPECT_EQ(serve(*cache, alpha, other).outcome, Outcome::cold);
  const Acquisition back = serve(*cache, beta, prompt);
  EXPECT_EQ(back.outcome, Outcome::hit_restore) << "beta's segments are untouched";
  EXPECT_EQ(back.reused, 39);
}

// Session isolation: a 10-token shared prefix (not on a block or segment line) and two sessions
// whose prompts are identical past it: nothing past the prefix may cross from one to the other.
struct SessionFixture : ScopeFixture {
  static constexpr std::int32_t kShared = 10;
  std::vector<Token> prompt = concat(range_tokens(0, kShared), range_tokens(100, 30));
  RequestKey alice{"ns", "alice", {}, kAlpha, kShared};
  RequestKey bob{"ns", "bob", {}, kAlpha, kShared};
  RequestKey anonymous{"ns", "", {}, kAlpha, kShared};
};

TEST_F(SessionFixture, OnTheDeviceAnotherSessionReusesOnlyTheSharedPrefix) {
  auto cache = make();
  EXPECT_EQ(serve(*cache, alice, prompt).outcome, Outcome::cold);
  const Acquisition other = serve(*cache, bob, prompt);
  EXPECT_EQ(other.outcome, Outcome::partial);
  EXPECT_EQ(other.reused, kShared);
  EXPECT_FALSE(other.in_session);
  const Acquisition own = serve(*cache, alice, prompt);
  EXPECT_EQ(own.outcome, Outcome::hit_extend);
  EXPECT_EQ(own.reused, 39);
  EXPECT_EQ(serve(*cache, bob, prompt).reused, 39) << "bob's own entry, kept although alice's covers it";
  EXPECT_EQ(serve(*cache, anonymous, prompt).reused, kShared);
  EXPECT_EQ(serve(*cache, anonymous, prompt).reused, kShared) << "a request without a session has no own entries";
}

TEST_F(SessionFixture, WithoutAWallSessionsAreOnlyAPreference) {
  auto cache = make();
  alice.shared_prefix = kNoFork;
  bob.shared_prefix = kNoFork;
  serve(*cache, alice, prompt);
  EXPECT_EQ(serve(*cache, bob, prompt).reused, 39);
}

TEST_F(SessionFixture, InFlightAnotherSessionSharesOnlyTheSharedPrefix) {
  auto cache = make();
  ASSERT_EQ(PrefixCacheProbe(*cache).acquire(alice, prompt, 0).reused, 0);
  feed(engine, 0, prompt, 0, static_cast<int>(prompt.size()));
  cache->advance(0, static_cast<std::int32_t>(prompt.size()));
  const Acquisition bobs = PrefixCacheProbe(*cache).acquire(bob, prompt, 1);
  EXPECT_FALSE(bobs.waiting);
  EXPECT_EQ(bobs.reused, kShared);
  EXPECT_EQ(engine.sequence_tokens(1), range_tokens(0, kShared));
  cache->release(1);
  cache->release(0);
  EXPECT_EQ(PrefixCacheProbe(*cache).verify(), "");
}

TEST_F(SessionFixture, InTheHostTierAnotherSessionFindsOnlyTheSharedPrefix) {
  auto cache = make();
  serve(*cache, alice, prompt);
  cache->release_device_cells(1000);
  ASSERT_EQ(cache->stats().device.entries, 0);
  // Segments of 8 tokens: [0,8) ends before the fork at 10 and is shared; [8,16) covers it and is
  // alice's, and the wall segment [8,10) holds the rest of the shared prefix for everyone.
  const Acquisition other = serve(*cache, bob, prompt);
  EXPECT_EQ(other.outcome, Outcome::hit_restore);
  EXPECT_EQ(other.reused, kShared);
  cache->release_device_cells(1000);
  const Acquisition own = serve(*cache, alice, prompt);
  EXPECT_EQ(own.outcome, Outcome::hit_restore);
  EXPECT_EQ(own.reused, 39);
  cache->release_device_cells(1000);
  EXPECT_EQ(serve(*cache, anonymous, prompt).reused, kShared);
}

TEST_F(SessionFixture, OnDiskAnotherSessionFindsOnlyTheSharedPrefix) {
  config.disk_path = disk.string();
  {
    auto cache = make();
    serve(*cache, alice, prompt);
    PrefixCacheProbe(*cache).flush_disk();
  }
  // A new cache over the same directory each time: everything comes from disk.
  {
    auto cache = make();
    const Acquisition other = serve(*cache, bob, prompt);
    EXPECT_EQ(other.tier, Tier::disk);
    EXPECT_EQ(other.reused, kShared) << "the whole shared prefix: [0,8) and the wall segment [8,10)";
  }
  auto cache = make();
  const Acquisition own = serve(*cache, alice, prompt);
  EXPECT_EQ(own.tier, Tier::disk);
  EXPECT_EQ(own.reused, 39);
}

TEST_F(SessionFixture, ARequestWithoutASessionKeepsOnlyTheSharedPrefix) {
  auto cache = make();
  serve(*cache, anonymous, prompt);
  const CacheStats stats = cache->stats();
  EXPECT_EQ(stats.device.entries, 1);
  EXPECT_EQ(stats.device.cells, kShared);
  EXPECT_EQ(serve(*cache, bob, prompt).reused, kShared);
}

}  // namespace
}  // namespace prefixd::cache
