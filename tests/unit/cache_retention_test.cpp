// Retained prefixes: the registry's budget, renewal and expiry; the host and checkpoint stores
// evict around retained keys, but never refuse room because of them.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <vector>

#include "cache/block_hash.h"
#include "cache/checkpoint_store.h"
#include "cache/host_store.h"
#include "cache/prefix_cache.h"
#include "cache/retention.h"

namespace prefixd::cache {
namespace {

using engine::Token;
using namespace std::chrono_literals;

std::vector<Token> run(Token first, int n) {
  std::vector<Token> out(static_cast<std::size_t>(n));
  std::iota(out.begin(), out.end(), first);
  return out;
}

Digest key(std::uint8_t byte) {
  Digest d{};
  d[0] = byte;
  return d;
}

const ScopeId kTenantA = scope_id("a");
const ScopeId kTenantB = scope_id("b");

Retention retention(const std::string& ns, std::vector<Token> tokens, const ScopeId& scope,
                    RetentionClock::time_point until, std::vector<Digest> keys = {}) {
  return Retention{.ns = ns, .tokens = std::move(tokens), .scope = scope, .until = until, .keys = std::move(keys)};
}

TEST(Retentions, AConversationThatMovesItsBreakpointHoldsOneRetentionWithTheLaterDeadline) {
  Retentions r(1000);
  const auto now = RetentionClock::now();
  EXPECT_EQ(r.add(retention("ns", run(0, 100), kTenantA, now + 1h, {key(1)}), now), Retentions::Added::retained);
  // The next turn: the breakpoint moved on, with a 5-minute TTL; the hour carries over.
  EXPECT_EQ(r.add(retention("ns", run(0, 150), kTenantA, now + 5min, {key(1), key(2)}), now), Retentions::Added::renewed);
  EXPECT_EQ(r.size(), 1);
  EXPECT_EQ(r.tokens(), 150);
  EXPECT_TRUE(r.holds(key(2)));
  EXPECT_EQ(r.expire(now + 30min), 0) << "the hour carried over";
  // A shorter prefix of a retained one only prolongs it.
  EXPECT_EQ(r.add(retention("ns", run(0, 50), kTenantA, now + 2h, {key(1)}), now), Retentions::Added::renewed);
  EXPECT_EQ(r.size(), 1);
  EXPECT_EQ(r.expire(now + 90min), 0);
  EXPECT_TRUE(r.covers("ns", run(0, 200)));
  EXPECT_FALSE(r.covers("ns", run(0, 149))) << "an entry shorter than the prefix does not hold it";
  EXPECT_FALSE(r.covers("other", run(0, 200)));
  EXPECT_EQ(r.expire(now + 3h), 1);
  EXPECT_FALSE(r.holds(key(1)));
  EXPECT_EQ(r.tokens(), 0);
  EXPECT_EQ(r.counters().added, 1);
  EXPECT_EQ(r.counters().renewed, 2);
  EXPECT_EQ(r.counters().expired, 1);
}

TEST(Retentions, EachTenantStaysWithinItsBudgetByLiftingItsNearestDeadlines) {
  Retentions r(300);
  const auto now = RetentionClock::now();
  ASSERT_EQ(r.add(retention("a1", run(0, 100), kTenantA, now + 10min, {key(1)}), now), Retentions::Added::retained);
  ASSERT_EQ(r.add(retention("a1", run(1000, 100), kTenantA, now + 5min, {key(2)}), now), Retentions::Added::retained);
  ASSERT_EQ(r.add(retention("b1", run(0, 250), kTenantB, now + 1min, {key(3)}), now), Retentions::Added::retained);
  // Tenant A's third prefix passes its 300 tokens: its nearest deadline (key 2) gives way; tenant
  // B's retention, with the nearest deadline of all, is not A's to lift.
  ASSERT_EQ(r.add(retention("a1", run(2000, 150), kTenantA, now + 1h, {key(4)}), now), Retentions::Added::retained);
  EXPECT_TRUE(r.holds(key(1)));
  EXPECT_FALSE(r.holds(key(2)));
  EXPECT_TRUE(r.holds(key(3)));
  EXPECT_TRUE(r.holds(key(4)));
  EXPECT_EQ(r.tokens_of(kTenantA), 250);
  EXPECT_EQ(r.counters().lifted, 1);
  // Longer than the whole budget: refused, nothing lifted.
  EXPECT_EQ(r.add(retention("a1", run(5000, 301), kTenantA, now + 1h), now), Retentions::Added::refused);
  EXPECT_EQ(r.counters().refused, 1);
  EXPECT_EQ(r.size(), 3);
  // A forget of a path lifts what shares more than the kept tokens with it.
  r.lift_path("a1", run(2000, 10), 5);
  EXPECT_FALSE(r.holds(key(4)));
  r.lift_path("a1", run(0, 10), 10);
  EXPECT_TRUE(r.holds(key(1))) << "nothing past the kept tokens is shared";
  r.clear_scope(kTenantB);
  EXPECT_FALSE(r.holds(key(3)));
  Retentions off(0);
  EXPECT_EQ(off.add(retention("a1", run(0, 10), kTenantA, now + 1h), now), Retentions::Added::refused);
}

HostSegment segment(Token first, std::size_t bytes) {
  HostSegment s;
  s.tokens = 4;
  s.token_ids = run(first, 4);
  s.state = engine::Bytes(bytes, 7);
  return s;
}

TEST(RetainedHostSegments, EvictionPassesOverThemUntilNothingElseIsLeft) {
  HostStore store(300, 100);
  std::vector<Digest> retained;
  store.set_retained([&](const Digest& k) { return std::ranges::find(retained, k) != retained.end(); });
  HostStore::Evicted evicted;
  ASSERT_TRUE(store.insert(key(1), segment(0, 100), evicted));
  ASSERT_TRUE(store.insert(key(2), segment(10, 100), evicted));
  ASSERT_TRUE(store.insert(key(3), segment(20, 100), evicted));
  retained = {key(1)};
  // Key 1 is the least recently used, but retained: key 2 goes.
  ASSERT_TRUE(store.insert(key(4), segment(30, 100), evicted));
  EXPECT_TRUE(store.contains(key(1)));
  EXPECT_FALSE(store.contains(key(2)));
  EXPECT_EQ(evicted.capacity, 1);
  // The TTL passes over it too.
  store.expire(std::chrono::steady_clock::now() + 1h, evicted);
  EXPECT_TRUE(store.contains(key(1)));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(evicted.ttl, 2);
  // When only retained segments are left, room is still made: they go like any other.
  retained = {key(1), key(5), key(6)};
  ASSERT_TRUE(store.insert(key(5), segment(40, 100), evicted));
  ASSERT_TRUE(store.insert(key(6), segment(50, 100), evicted));
  ASSERT_TRUE(store.insert(key(7), segment(60, 100), evicted));
  EXPECT_FALSE(store.contains(key(1))) << "the least recently used of the retained";
  EXPECT_TRUE(store.contains(key(7)));
  EXPECT_EQ(store.verify_lru_order(), "");
}

TEST(RetainedCheckpoints, OutliveTheirSessionChainAndTheLruWhileOthersCanGo) {
  BlockHasher hasher(CacheConfig{}.hash, 4);
  CheckpointStore store(hasher, 300, 100, 1);
  std::vector<Digest> retained;
  store.set_retained([&](const Digest& k) { return std::ranges::find(retained, k) != retained.end(); });
  const auto a = run(0, 40);
  const auto chain = hasher.chain("ns", a);
  const auto first = std::span<const Token>(a).first(8);
  retained = {store.key_of(Lineage{"ns"}, a, chain, 8)};
  ASSERT_TRUE(store.save(Lineage{"ns"}, first, chain, engine::Bytes(100, 1), "s", CheckpointKind::boundary));
  // The session's chain holds one link: the next save would supersede the first; retained, it stays.
  ASSERT_TRUE(store.save(Lineage{"ns"}, std::span<const Token>(a).first(12), chain, engine::Bytes(100, 2), "s",
                         CheckpointKind::boundary));
  EXPECT_EQ(store.find(Lineage{"ns"}, a, chain, 8).position, 8);
  EXPECT_EQ(store.stats().superseded, 0);
  // Capacity: the oldest is retained, so the next oldest goes.
  ASSERT_TRUE(store.save(Lineage{"ns"}, std::span<const Token>(a).first(16), chain, engine::Bytes(100, 3), "",
                         CheckpointKind::boundary));
  ASSERT_TRUE(store.save(Lineage{"ns"}, std::span<const Token>(a).first(20), chain, engine::Bytes(100, 4), "",
                         CheckpointKind::boundary));
  EXPECT_EQ(store.find(Lineage{"ns"}, a, chain, 8).position, 8);
  EXPECT_EQ(store.find(Lineage{"ns"}, a, chain, 15).position, 8) << "12 was evicted instead";
  store.expire(std::chrono::steady_clock::now() + 1h);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.find(Lineage{"ns"}, a, chain, 40).position, 8);
  EXPECT_EQ(store.verify(), "");
}

}  // namespace
}  // namespace prefixd::cache
