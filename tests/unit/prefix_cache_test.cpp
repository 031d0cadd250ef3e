// The prompt cache over the FakeEngine: keys, radix tree, tiers, budgets, and random streams.
#include <gtest/gtest.h>

#include <random>

#include "cache/block_hash.h"
#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "cache/radix_tree.h"
#include "support/fake_engine.h"

namespace prefixd::cache {
namespace {

using engine::Token;

std::vector<Token> seq_of(std::initializer_list<int> values) { return {values.begin(), values.end()}; }

std::vector<Token> range_tokens(int begin, int count) {
  std::vector<Token> out;
  for (int i = 0; i < count; ++i) out.push_back((begin + i) % 250);
  return out;
}

// Feeds tokens[from, to) into `seq` through real decode calls.
void feed(engine::FakeEngine& e, engine::SeqId seq, const std::vector<Token>& tokens, int from, int to) {
  for (int i = from; i < to; i += e.batch_size()) {
    std::vector<engine::BatchToken> batch;
    for (int j = i; j < std::min(to, i + e.batch_size()); ++j) batch.push_back({tokens[static_cast<size_t>(j)], j, seq, false});
    ASSERT_EQ(e.decode(batch), engine::DecodeStatus::ok);
  }
}

TEST(BlockHash, Sha256MatchesTheStandardTestVector) {
  const std::string abc = "abc";
  const Digest d = sha256({reinterpret_cast<const std::uint8_t*>(abc.data()), abc.size()});
  EXPECT_EQ(to_hex(d), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string long_input(1000, 'a');
  EXPECT_EQ(to_hex(sha256({reinterpret_cast<const std::uint8_t*>(long_input.data()), long_input.size()})),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(BlockHash, ChainDependsOnNamespaceAndEveryEarlierBlock) {
  for (HashAlgorithm algorithm : {HashAlgorithm::sha256, HashAlgorithm::blake3}) {
    BlockHasher hasher(algorithm, 4);
    const auto tokens = range_tokens(0, 10);
    const auto a = hasher.chain("namespace-a", tokens);
    ASSERT_EQ(a.size(), 2u) << "only whole blocks are hashed";
    EXPECT_EQ(a, hasher.chain("namespace-a", tokens));
    EXPECT_NE(a[0], hasher.chain("namespace-b", tokens)[0]);
    auto edited = tokens;
    edited[1] = 999;
    const auto b = hasher.chain("namespace-a", edited);
    EXPECT_NE(a[0], b[0]);
    EXPECT_NE(a[1], b[1]) << "a block's hash covers every block before it";
  }
  EXPECT_THROW(parse_hash_algorithm("md5"), std::invalid_argument);
}

TEST(RadixTree, LongestMatchAndTwoTierSessionPreference) {
  RadixTree tree;
  tree.insert(1, seq_of({1, 2, 3, 4, 5}), "alice");
  tree.insert(2, seq_of({1, 2, 3, 9, 9, 9, 9}), "bob");
  EXPECT_EQ(tree.unique_tokens(), 5 + 4);

  auto m = tree.match(seq_of({1, 2, 3, 4, 7}), "alice");
  EXPECT_EQ(m.length, 4);
  EXPECT_EQ(m.entry, 1u);
  EXPECT_TRUE(m.in_session);

  // Bob's entry matches 6 tokens, alice's only 3: the strictly longer cross-session match wins.
  m = tree.match(seq_of({1, 2, 3, 9, 9, 9, 1}), "alice");
  EXPECT_EQ(m.length, 6);
  EXPECT_EQ(m.entry, 2u);
  EXPECT_FALSE(m.in_session);

  // Equal length: the in-session entry is preferred.
  m = tree.match(seq_of({1, 2, 3, 7}), "bob");
  EXPECT_EQ(m.length, 3);
  EXPECT_EQ(m.entry, 2u);
  EXPECT_TRUE(m.in_session);

  EXPECT_EQ(tree.match_whole(seq_of({1, 2, 3, 4, 5, 6}), "x").entry, 1u);
  EXPECT_EQ(tree.match_whole(seq_of({1, 2, 3, 4}), "x").length, 0) << "entry 1 is not wholly inside the query";

  tree.erase(1);
  EXPECT_EQ(tree.unique_tokens(), 7);
  EXPECT_EQ(tree.match(seq_of({1, 2, 3, 4, 5}), "alice").entry, 2u);
  tree.erase(2);
  EXPECT_EQ(tree.unique_tokens(), 0);
  EXPECT_EQ(tree.match(seq_of({1, 2}), "alice").length, 0);
}

struct CacheFixture : ::testing::Test {
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
  // Slots 0-1, holders 2-6, scratch 7.
  std::unique_ptr<PrefixCache> make(int holders = 5) {
    std::vector<engine::SeqId> ids;
    for (int i = 0; i < holders; ++i) ids.push_back(2 + i);
    return std::make_unique<PrefixCache>(engine, config, ids, 7);
  }
  // A request's life: acquire into slot, feed the rest of the prompt, donate.
  Acquisition serve(PrefixCache& cache, const RequestKey& key, const std::vector<Token>& prompt, engine::SeqId slot = 0) {
    const Acquisition got = PrefixCacheProbe(cache).acquire(key, prompt, slot);
    EXPECT_EQ(engine.sequence_tokens(slot), std::vector<Token>(prompt.begin(), prompt.begin() + got.reused))
        << "reused cells hold exactly the request's own tokens";
    feed(engine, slot, prompt, got.reused, static_cast<int>(prompt.size()));
    cache.advance(slot, static_cast<std::int32_t>(prompt.size()));
    cache.donate(slot, prompt);
    EXPECT_TRUE(engine.sequence_positions(slot).empty());
    return got;
  }
};

TEST_F(CacheFixture, IdenticalResendReusesAllButTheLastToken) {
  auto cache = make();
  const RequestKey key{"ns", "s1"};
  const auto prompt = range_tokens(0, 40);
  EXPECT_EQ(serve(*cache, key, prompt).outcome, Outcome::cold);
  const Acquisition warm = serve(*cache, key, prompt);
  EXPECT_EQ(warm.outcome, Outcome::hit_extend);
  EXPECT_EQ(warm.reused, 39) << "the one-token guard keeps the last prompt token to feed";
  EXPECT_EQ(warm.tier, Tier::device);
  EXPECT_EQ(cache->stats().requests.hits, 1);
  EXPECT_EQ(cache->stats().requests.misses, 1);
}

TEST_F(CacheFixture, GrowingConversationExtendsItsEntryInPlace) {
  auto cache = make();
  const RequestKey key{"ns", "s1"};
  auto prompt = range_tokens(0, 20);
  serve(*cache, key, prompt);
  for (int turn = 1; turn < 5; ++turn) {
    const auto previous = prompt.size();
    auto more = range_tokens(100 + turn * 10, 7);
    prompt.insert(prompt.end(), more.begin(), more.end());
    const Acquisition got = serve(*cache, key, prompt);
    EXPECT_EQ(got.outcome, Outcome::hit_extend);
    EXPECT_EQ(got.reused, static_cast<int>(previous));
  }
  EXPECT_EQ(cache->stats().device.entries, 1) << "each turn supersedes the previous entry";
}

// An image's positions are computed in one piece: a reuse that would end inside one (an entry or
// a host segment that diverges there) starts at the image instead, from the device tier and from
// the host tier alike.
TEST_F(CacheFixture, AReuseNeverEndsInsideAnUnbrokenSpan) {
  auto cache = make();
  const auto prompt = range_tokens(0, 60);
  auto edited = prompt;
  edited[30] = 249;  // diverges inside [20, 36)
  RequestKey key{"ns", "s"};
  key.unbroken = {{20, 36}};
  serve(*cache, {"ns", "s"}, prompt);
  const Acquisition from_device = serve(*cache, key, edited);
  EXPECT_EQ(from_device.tier, Tier::device);
  EXPECT_EQ(from_device.reused, 20);

  ASSERT_GT(cache->release_device_cells(1 << 20), 0);  // everything to the host tier
  auto again = edited;
  again[31] = 248;  // the host tier holds `edited`: it diverges inside the span again
  const Acquisition from_host = serve(*cache, key, again);
  EXPECT_EQ(from_host.tier, Tier::host);
  EXPECT_EQ(from_host.reused, 20);
  EXPECT_EQ(PrefixCacheProbe(*cache).verify(), "");

  // Without the span the same prompt reuses up to where it diverges.
  ASSERT_GT(cache->release_device_cells(1 << 20), 0);
  auto third = again;
  third[32] = 247;
  EXPECT_EQ(serve(*cache, {"ns", "s"}, third).reused, 32);
}

TEST_F(CacheFixture, DifferentNamespaceNeverHits) {
  auto cache = make();
  const auto prompt = range_tokens(0, 40);
  serve(*cache, {"ns-a", ""}, prompt);
  const Acquisition other = serve(*cache, {"ns-b", ""}, prompt);
  EXPECT_EQ(other.outcome, Outcome::cold);
  EXPECT_EQ(other.reused, 0);
}

TEST_F(CacheFixture, EditedConversationReusesTheTokensBeforeTheEdit) {
  auto cache = make();
  const RequestKey key{"ns", "s"};
  auto prompt = range_tokens(0, 60);
  serve(*cache, key, prompt);
  prompt[30] = 249;
  const Acquisition got = serve(*cache, key, prompt);
  EXPECT_EQ(got.outcome, Outcome::partial);
  EXPECT_EQ(got.reused, 30);
}

TEST_F(CacheFixture, PartialMatchesAreRefusedWithoutApc) {
  config.apc_enabled = false;
  auto cache = make();
  const RequestKey key{"ns", "s"};
  auto prompt = range_tokens(0, 60);
  serve(*cache, key, prompt);
  prompt[30] = 249;
  EXPECT_EQ(serve(*cache, key, prompt).reused, 0);
}

TEST_F(CacheFixture, MatchesShorterThanMinPrefixAreNotAdopted) {
  config.min_prefix = 32;
  auto cache = make();
  const RequestKey key{"ns", "s"};
  auto prompt = range_tokens(0, 60);
  serve(*cache, key, prompt);
  prompt[20] = 249;
  EXPECT_EQ(serve(*cache, key, prompt).outcome, Outcome::cold);
}

TEST_F(CacheFixture, EvictedEntryIsRestoredFromTheHostTier) {
  auto cache = make(1);  // one holder: the second entry demotes the first
  const auto a = range_tokens(0, 35);
  const auto b = range_tokens(120, 35);
  serve(*cache, {"ns", "a"}, a);
  serve(*cache, {"ns", "b"}, b);
  EXPECT_EQ(cache->stats().device.demotions, 1);
  EXPECT_EQ(cache->stats().host.entries, 5) << "35 tokens: four whole 8-token segments and a 3-token tail";
  const Acquisition back = serve(*cache, {"ns", "a"}, a);
  EXPECT_EQ(back.outcome, Outcome::hit_restore);
  EXPECT_EQ(back.tier, Tier::host);
  EXPECT_EQ(back.reused, 34);
}

TEST_F(CacheFixture, DemotedTailShorterThanASegmentIsKeptAndRestored) {
  auto cache = make(1);
  const auto a = range_tokens(0, 46);  // five 8-token grid segments and a 6-token tail
  serve(*cache, {"ns", "a"}, a);
  serve(*cache, {"ns", "b"}, range_tokens(120, 20));
  EXPECT_EQ(cache->stats().host.entries, 6);
  const Acquisition back = serve(*cache, {"ns", "a"}, a);
  EXPECT_EQ(back.outcome, Outcome::hit_restore);
  EXPECT_EQ(back.reused, 45) << "all but the one-token guard comes back, the partial last block included";

  // The next turn of the conversation restores the whole previous prompt.
  auto longer = a;
  for (Token t : range_tokens(200, 30)) longer.push_back(t);
  serve(*cache, {"ns", "b"}, range_tokens(120, 20));  // demotes `a` again (already stored)
  const Acquisition next = PrefixCacheProbe(*cache).acquire({"ns", "a"}, longer, 0);
  EXPECT_EQ(next.reused, 46);
  EXPECT_EQ(engine.sequence_tokens(0), a);
  cache->release(0);
}

TEST_F(CacheFixture, HostRestoreStopsAtTheTokenWhereThePromptDiverges) {
  auto cache = make(1);
  const auto a = range_tokens(0, 40);
  serve(*cache, {"ns", "a"}, a);
  serve(*cache, {"ns", "b"}, range_tokens(120, 20));
  auto edited = a;
  edited[21] = 250;  // inside the third 8-token segment, not on a block boundary
  const Acquisition got = PrefixCacheProbe(*cache).acquire({"ns", "a"}, edited, 0);
  EXPECT_EQ(got.outcome, Outcome::hit_restore);
  EXPECT_EQ(got.reused, 21);
  EXPECT_EQ(engine.sequence_tokens(0), std::vector<Token>(a.begin(), a.begin() + 21));
}

TEST_F(CacheFixture, HostEvictionTakesLeavesBeforeTheirPrefixes) {
  auto cache = make(1);
  const auto a = range_tokens(0, 32);  // exactly four 8-token segments
  serve(*cache, {"ns", "a"}, a);
  serve(*cache, {"ns", "b"}, range_tokens(120, 16));
  ASSERT_EQ(cache->stats().host.entries, 4);
  const std::uint64_t per_segment = cache->stats().host.bytes / 4;
  // Room for three and a half segments: storing the fourth must not evict the first.
  config.host_capacity_bytes = per_segment * 3 + per_segment / 2;
  cache = make(1);
  serve(*cache, {"ns", "a"}, a);
  serve(*cache, {"ns", "b"}, range_tokens(120, 16));
  EXPECT_EQ(cache->stats().host.entries, 3);
  EXPECT_EQ(PrefixCacheProbe(*cache).acquire({"ns", "a"}, a, 0).reused, 24) << "the three segments kept are the first three";
}

TEST_F(CacheFixture, SharedSystemPromptIsStoredOnce) {
  auto cache = make(5);
  const auto system = range_tokens(0, 64);
  for (int s = 0; s < 5; ++s) {
    auto prompt = system;
    auto question = range_tokens(150 + s * 9, 8);
    prompt.insert(prompt.end(), question.begin(), question.end());
    serve(*cache, {"ns", "session-" + std::to_string(s)}, prompt);
  }
  EXPECT_EQ(cache->stats().device.cells, 64 + 5 * 8);
  EXPECT_EQ(engine.used_cells(), 64 + 5 * 8) << "holders share the system prompt's cells";
}

TEST_F(CacheFixture, HostSegmentThatCannotBeRestoredIsDroppedAndTheRequestGoesCold) {
  // Restores fail when the scratch sequence cannot take the state: fill the context first.
  auto cache = make(1);
  const auto a = range_tokens(0, 35);
  serve(*cache, {"ns", "a"}, a);
  serve(*cache, {"ns", "b"}, range_tokens(120, 35));
  ASSERT_EQ(cache->stats().host.entries, 5);
  feed(engine, 1, range_tokens(0, 4096 - engine.used_cells()), 0, 4096 - engine.used_cells());
  const Acquisition got = PrefixCacheProbe(*cache).acquire({"ns", "a"}, a, 0);
  EXPECT_EQ(got.reused, 0);
  EXPECT_GE(cache->stats().host.failed_restores, 1);
  EXPECT_TRUE(engine.sequence_positions(0).empty());
}

TEST_F(CacheFixture, ResetEmptiesEveryTier) {
  auto cache = make(1);
  serve(*cache, {"ns", "a"}, range_tokens(0, 35));
  serve(*cache, {"ns", "b"}, range_tokens(120, 35));
  const ResetReport report = cache->reset();
  EXPECT_EQ(report.entries, 1 + 5);
  EXPECT_GT(report.bytes, 0u);
  EXPECT_EQ(cache->stats().device.entries, 0);
  EXPECT_EQ(cache->stats().host.entries, 0);
  EXPECT_EQ(engine.used_cells(), 0);
}

TEST_F(CacheFixture, CompactionRewritesIdleEntriesKeepingTheirSharing) {
  config.compaction = Compaction::idle;
  auto cache = make(5);
  const auto system = range_tokens(0, 40);
  auto a = system;
  auto b = system;
  for (Token t : range_tokens(100, 9)) a.push_back(t);
  for (Token t : range_tokens(150, 13)) b.push_back(t);
  serve(*cache, {"ns", "a"}, a);
  serve(*cache, {"ns", "b"}, b);
  const std::int32_t cells_before = engine.used_cells();
  ASSERT_EQ(cells_before, 40 + 9 + 13);
  EXPECT_EQ(cache->tick(/*nothing_running=*/false), 0) << "never while something runs";

  EXPECT_EQ(cache->tick(true), 40 + 9 + 13) << "each cell is rewritten once";
  EXPECT_EQ(engine.used_cells(), cells_before) << "shared cells stay shared";
  EXPECT_EQ(cache->stats().device.compactions, 1);
  EXPECT_EQ(cache->tick(true), 0) << "nothing was donated since";
  EXPECT_EQ(cache->stats().device.compactions, 1);
  // The entries still serve their prompts token for token.
  EXPECT_EQ(PrefixCacheProbe(*cache).acquire({"ns", "a"}, a, 1).reused, static_cast<std::int32_t>(a.size()) - 1);
  EXPECT_EQ(engine.sequence_tokens(1), std::vector<Token>(a.begin(), a.end() - 1));
  serve(*cache, {"ns", "c"}, range_tokens(200, 20));  // a donation: due again
  EXPECT_EQ(cache->tick(true), 0) << "never while one of the cache's sequences runs";
  cache->release(1);
  EXPECT_GT(cache->tick(true), 0) << "due once nothing runs";
  EXPECT_EQ(cache->stats().device.compactions, 2);
}

TEST_F(CacheFixture, CompactionCanBeTurnedOff) {
  config.compaction = Compaction::never;
  auto cache = make();
  serve(*cache, {"ns", "a"}, range_tokens(0, 40));
  EXPECT_EQ(cache->tick(/*nothing_running=*/true), 0);
  EXPECT_EQ(cache->stats().device.compactions, 0);
}

TEST_F(CacheFixture, ExpiredEntriesAreEvictedForTtl) {
  config.ttl = std::chrono::seconds(0);
  auto cache = make();
  serve(*cache, {"ns", "a"}, range_tokens(0, 35));
  cache->tick(/*nothing_running=*/false);  // the first tick expires
  EXPECT_EQ(cache->stats().device.entries, 0);
  EXPECT_GE(cache->stats().evictions_ttl(), 1);
}

}  // namespace
}  // namespace prefixd::cache
