// The prompt cache's invariants, checked against the FakeEngine's real cells: exact accounting,
// locks, in-flight sharing, per-tier budgets and host LRU order — on reproductions of past faults
// and on random streams of concurrent requests whose budgets bind.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "support/fake_engine.h"

namespace prefixd::cache {
namespace {

using engine::SeqId;
using engine::Token;

std::vector<Token> tokens_from(int begin, int count) {
  std::vector<Token> out;
  for (int i = 0; i < count; ++i) out.push_back((begin + i) % 250);
  return out;
}

std::vector<Token> concat(std::vector<Token> a, const std::vector<Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Slots [0, kSlots) run requests, holders follow, then the scratch sequence.
constexpr int kSlots = 4;
constexpr int kHolders = 5;
constexpr SeqId kScratch = kSlots + kHolders;

bool is_holder(SeqId s) { return s >= kSlots && s < kSlots + kHolders; }
bool is_slot(SeqId s) { return s >= 0 && s < kSlots; }

struct Harness {
  engine::FakeEngine engine;
  std::unique_ptr<PrefixCache> cache;

  Harness(int n_ctx, CacheConfig config) : engine({.n_ctx = n_ctx, .n_batch = 32, .n_seq = kScratch + 1}) {
    std::vector<SeqId> holders;
    for (int i = 0; i < kHolders; ++i) holders.push_back(kSlots + i);
    cache = std::make_unique<PrefixCache>(engine, config, holders, kScratch);
  }

  // Feeds tokens[from, to) of `seq`; false when the context had no room.
  bool feed(SeqId seq, const std::vector<Token>& tokens, int from, int to) {
    for (int i = from; i < to; i += engine.batch_size()) {
      std::vector<engine::BatchToken> batch;
      for (int j = i; j < std::min(to, i + engine.batch_size()); ++j) batch.push_back({tokens[static_cast<size_t>(j)], j, seq, false});
      if (engine.decode(batch) != engine::DecodeStatus::ok) return false;
      cache->advance(seq, std::min(to, i + engine.batch_size()));
    }
    return true;
  }

  // Every cell is accounted: the holders' cells are exactly what the cache says it holds, those it
  // says running requests use are exactly the ones they share with holders, and every other used
  // cell belongs to running requests alone.
  void check_cells(const std::string& where) const {
    const auto any_holder = [](const std::set<SeqId>& o) { return std::ranges::any_of(o, is_holder); };
    const auto any_slot = [](const std::set<SeqId>& o) { return std::ranges::any_of(o, is_slot); };
    const CacheStats s = cache->stats();
    ASSERT_EQ(engine.count_cells(any_holder), PrefixCacheProbe(*cache).device_cells()) << where;
    ASSERT_EQ(s.device.cells, PrefixCacheProbe(*cache).device_cells()) << where << ": the published stats agree";
    ASSERT_EQ(engine.count_cells([&](const auto& o) { return any_holder(o) && any_slot(o); }), s.device.locked_cells)
        << where << ": locked cells are exactly the cells running requests share with entries";
    ASSERT_EQ(engine.count_cells([&](const auto& o) { return any_holder(o) && !any_slot(o); }), PrefixCacheProbe(*cache).idle_cells())
        << where << ": idle cells are exactly the holders' cells nobody running uses";
    ASSERT_EQ(engine.used_cells(), PrefixCacheProbe(*cache).device_cells() + engine.count_cells([&](const auto& o) { return !any_holder(o); }))
        << where;
    ASSERT_EQ(engine.count_cells([](const auto& o) { return o.contains(kScratch); }), 0) << where << ": scratch is empty";
    for (SeqId slot = 0; slot < kSlots; ++slot) {
      ASSERT_EQ(engine.count_cells([&](const auto& o) { return o.contains(slot) && any_holder(o); }),
                PrefixCacheProbe(*cache).locked_by(slot))
          << where << ": slot " << slot << " locks exactly the entry cells it uses";
    }
    ASSERT_EQ(PrefixCacheProbe(*cache).verify(), "") << where;
  }
};

// Small enough that every path is reached in a few hundred tokens; budgets that must bind are
// lowered by each test.
CacheConfig small_config() {
  return CacheConfig{.min_prefix = 4, .block_size = 4, .host_segment_tokens = 8, .host_capacity_bytes = 1 << 20,
                     .device_cells = 1 << 20};
}

TEST(CacheCells, PromptsSharingOnlyTheirFirstTokenShareItsCell) {
  Harness h(1024, small_config());
  const RequestKey key{"ns", ""};
  auto a = tokens_from(0, 25);
  auto b = a;
  for (size_t i = 1; i < b.size(); ++i) b[i] = 200 + static_cast<Token>(i % 40);
  for (const auto& prompt : {a, b}) {
    ASSERT_EQ(PrefixCacheProbe(*h.cache).acquire(key, prompt, 0).reused, 0);
    ASSERT_TRUE(h.feed(0, prompt, 0, static_cast<int>(prompt.size())));
    h.cache->donate(0, prompt);
    h.check_cells("after a donation");
  }
  EXPECT_EQ(h.engine.used_cells(), 49);
  EXPECT_EQ(PrefixCacheProbe(*h.cache).device_cells(), 49);
}

TEST(CacheCells, HostRestoreBesideADeviceEntryTakesTheSharedPrefixFromIt) {
  CacheConfig config = small_config();
  config.device_cells = 0;
  Harness h(1024, config);
  const auto system = tokens_from(0, 20);
  const auto a = concat(system, tokens_from(100, 60));
  const auto b = concat(system, tokens_from(170, 30));
  for (const auto& prompt : {a, b}) {
    PrefixCacheProbe(*h.cache).acquire({"ns", "x"}, prompt, 0);
    ASSERT_TRUE(h.feed(0, prompt, PrefixCacheProbe(*h.cache).locked_by(0), static_cast<int>(prompt.size())));
    h.cache->donate(0, prompt);
  }
  // Budget 0 on this backend: `a` went to the host tier when `b` arrived; `b` stays resident.
  ASSERT_EQ(h.cache->stats().device.entries, 1);
  ASSERT_EQ(h.cache->stats().device.demotions, 1);
  const auto again = concat(a, tokens_from(20, 5));
  const Acquisition got = PrefixCacheProbe(*h.cache).acquire({"ns", "x"}, again, 1);
  EXPECT_EQ(got.outcome, Outcome::hit_restore);
  EXPECT_EQ(got.reused, 80);
  EXPECT_EQ(h.engine.sequence_tokens(1), a);
  EXPECT_EQ(PrefixCacheProbe(*h.cache).locked_by(1), 20) << "the system prompt's cells come from the resident entry";
  h.check_cells("after the restore");
  EXPECT_EQ(h.engine.used_cells(), 20 + 60) << "the resident entry's own 30 cells went to the host tier first";
  EXPECT_EQ(h.cache->stats().device.demotions, 2);
}

// A 50-token entry, and a request in sequence 1 that adopted its first 40 tokens and computed a
// 20-token continuation of its own (60 positions, 40 of them locked). Returns that request's prompt.
std::vector<Token> running_beside_an_entry(Harness& h) {
  const auto a = tokens_from(0, 50);
  PrefixCacheProbe(*h.cache).acquire({"ns", ""}, a, 0);
  EXPECT_TRUE(h.feed(0, a, 0, 50));
  h.cache->donate(0, a);
  const auto b = concat(tokens_from(0, 40), tokens_from(150, 20));
  EXPECT_EQ(PrefixCacheProbe(*h.cache).acquire({"ns", ""}, b, 1).reused, 40);
  EXPECT_TRUE(h.feed(1, b, 40, 60));
  return b;
}

TEST(CacheLocks, LockedCellsAreNeverReleasedAndReleaseCountsOnlyWhatItFrees) {
  CacheConfig config = small_config();
  config.device_cells = 1000;
  Harness h(1024, config);
  const auto b = running_beside_an_entry(h);
  if (::testing::Test::HasFatalFailure()) return;
  h.check_cells("while running");
  EXPECT_EQ(PrefixCacheProbe(*h.cache).idle_cells(), 10);
  EXPECT_EQ(h.cache->release_device_cells(1000), 10) << "only the unlocked tail can be freed";
  EXPECT_EQ(PrefixCacheProbe(*h.cache).device_cells(), 40) << "the locked prefix stays an entry";
  h.check_cells("after the release");
  EXPECT_EQ(h.cache->release_device_cells(1000), 0);
  h.cache->donate(1, b);
  h.check_cells("after the donation");
  EXPECT_EQ(PrefixCacheProbe(*h.cache).device_cells(), 60);
}

TEST(CacheAdmission, MakeRoomCountsSharedCellsOnceAndFreesOnlyWhatThePromptNeeds) {
  CacheConfig config = small_config();
  config.device_cells = 1000;
  Harness h(128, config);
  running_beside_an_entry(h);
  if (::testing::Test::HasFatalFailure()) return;
  const std::int64_t running = 60 + 1;  // its tokens and one for the next
  // In use: 50 entry cells + 20 of b's own + 1 = 71 of 128; the shared 40 are counted once.
  EXPECT_TRUE(PrefixCacheProbe(*h.cache).make_room(running, 57));
  EXPECT_EQ(PrefixCacheProbe(*h.cache).device_cells(), 50) << "a prompt that fits frees nothing";
  // 71 + 62 = 133: five cells short; only the entry's idle tail (10 cells) can be freed.
  EXPECT_TRUE(PrefixCacheProbe(*h.cache).make_room(running, 62));
  EXPECT_EQ(PrefixCacheProbe(*h.cache).device_cells(), 40) << "the idle tail went; the locked prefix stays";
  h.check_cells("after making room");
  EXPECT_EQ(h.engine.used_cells() + 62, 122);
  // Nothing idle is left: a prompt beyond the free cells does not fit.
  EXPECT_FALSE(PrefixCacheProbe(*h.cache).make_room(running, 68));
  EXPECT_EQ(PrefixCacheProbe(*h.cache).device_cells(), 40);
  h.cache->release(1);
}

TEST(CacheInflight, ASecondRequestWaitsForThePrefixTheFirstIsComputingAndCountsAsAHit) {
  Harness h(1024, small_config());
  const auto system = tokens_from(0, 64);
  const auto a = concat(system, tokens_from(100, 5));
  const auto b = concat(system, tokens_from(120, 7));
  EXPECT_EQ(PrefixCacheProbe(*h.cache).acquire({"ns", "a"}, a, 0).outcome, Outcome::cold);
  const Acquisition wait = PrefixCacheProbe(*h.cache).acquire({"ns", "b"}, b, 1);
  ASSERT_TRUE(wait.waiting);
  EXPECT_EQ(h.cache->stats().requests.waiting, 1);
  ASSERT_TRUE(h.feed(0, a, 0, 32));
  EXPECT_TRUE(h.cache->take_resolved().empty()) << "half the prefix is not enough";
  ASSERT_TRUE(h.feed(0, a, 32, static_cast<int>(a.size())));
  const std::vector<Resolved> ready = h.cache->take_resolved();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].seq, 1);
  EXPECT_EQ(ready[0].acquisition.reused, 64);
  EXPECT_EQ(ready[0].acquisition.tier, Tier::device);
  EXPECT_EQ(h.engine.sequence_tokens(1), system);
  const CacheStats s = h.cache->stats();
  EXPECT_EQ(s.requests.hits, 1);
  EXPECT_EQ(s.requests.misses, 1);
  EXPECT_EQ(s.requests.inflight_shares, 1);
  EXPECT_EQ(s.requests.outcomes[static_cast<size_t>(Outcome::hit_extend)] + s.requests.outcomes[static_cast<size_t>(Outcome::partial)], 1);
  // When the first request finishes, the second one's shared cells become the entry's, locked.
  h.cache->donate(0, a);
  EXPECT_EQ(PrefixCacheProbe(*h.cache).locked_by(1), 64);
  h.check_cells("after the first donation");
  ASSERT_TRUE(h.feed(1, b, 64, static_cast<int>(b.size())));
  h.cache->donate(1, b);
  h.check_cells("after both");
  EXPECT_EQ(h.engine.used_cells(), 64 + 5 + 7);
}

TEST(CacheInflight, AWaiterWhoseSourceFailsStartsOverOnItsOwn) {
  Harness h(1024, small_config());
  const auto a = tokens_from(0, 70);
  PrefixCacheProbe(*h.cache).acquire({"ns", ""}, a, 0);
  ASSERT_TRUE(PrefixCacheProbe(*h.cache).acquire({"ns", ""}, concat(tokens_from(0, 60), tokens_from(200, 3)), 1).waiting);
  h.cache->release(0);
  const std::vector<Resolved> ready = h.cache->take_resolved();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].acquisition.outcome, Outcome::cold);
  EXPECT_EQ(h.cache->stats().requests.misses, 2);
  h.check_cells("after the release");
}

TEST(CacheHost, SegmentsHaveTheirOwnBudgetAndDoNotPushDeviceEntriesOut) {
  CacheConfig config = small_config();
  config.device_cells = 1000;
  config.host_max_segments = 6;
  Harness h(2048, config);
  // Fill the host tier through demotions, then keep donating: device entries stay.
  for (int i = 0; i < 12; ++i) {
    const auto p = tokens_from(i * 20, 30);
    PrefixCacheProbe(*h.cache).acquire({"ns", std::to_string(i)}, p, 0);
    ASSERT_TRUE(h.feed(0, p, 0, 30));
    h.cache->donate(0, p);
    if (i == 3) h.cache->release_device_cells(1000);
  }
  const CacheStats s = h.cache->stats();
  EXPECT_LE(s.host.entries, 6);
  EXPECT_EQ(s.device.entries, kHolders) << "every holder keeps an entry although the host tier is full";
  EXPECT_GT(s.host.evictions_lru, 0) << "the segment budget bound";
  h.check_cells("end");
}

TEST(CacheHost, AHostHitKeepsTheChainsRootTheMostRecentlyUsed) {
  CacheConfig config = small_config();
  Harness h(1024, config);
  const auto a = tokens_from(0, 32);  // four 8-token segments
  PrefixCacheProbe(*h.cache).acquire({"ns", ""}, a, 0);
  ASSERT_TRUE(h.feed(0, a, 0, 32));
  h.cache->donate(0, a);
  ASSERT_EQ(h.cache->release_device_cells(1000), 32);
  const std::uint64_t per_segment = h.cache->stats().host.bytes / 4;
  // A host hit, then an unrelated demotion that evicts exactly one segment.
  ASSERT_EQ(PrefixCacheProbe(*h.cache).acquire({"ns", ""}, a, 1).reused, 31);
  h.cache->release(1);
  ASSERT_EQ(PrefixCacheProbe(*h.cache).verify(), "");
  config.host_capacity_bytes = per_segment * 4;
  Harness tight(1024, config);
  for (const auto& p : {a, tokens_from(100, 8)}) {
    PrefixCacheProbe(*tight.cache).acquire({"ns", ""}, p, 0);
    ASSERT_TRUE(tight.feed(0, p, 0, static_cast<int>(p.size())));
    tight.cache->donate(0, p);
    ASSERT_EQ(PrefixCacheProbe(*tight.cache).acquire({"ns", ""}, a, 1).reused, 31);
    tight.cache->release(1);
    tight.cache->release_device_cells(1000);
  }
  EXPECT_EQ(tight.cache->stats().host.evictions_capacity, 1);
  EXPECT_EQ(PrefixCacheProbe(*tight.cache).acquire({"ns", ""}, a, 1).reused, 24) << "the leaf went, not the root";
  tight.check_cells("end");
}

TEST(CacheHost, AGrowingConversationKeepsOneTailSegmentNotOnePerTurn) {
  CacheConfig config = small_config();
  config.device_cells = 0;
  Harness h(1024, config);
  auto conversation = tokens_from(0, 11);  // one 8-token segment and a tail
  for (int turn = 0; turn < 5; ++turn) {
    PrefixCacheProbe(*h.cache).acquire({"ns", "a"}, conversation, 0);
    ASSERT_TRUE(h.feed(0, conversation, PrefixCacheProbe(*h.cache).locked_by(0), static_cast<int>(conversation.size())));
    h.cache->donate(0, conversation);
    h.cache->release_device_cells(1000);  // the whole conversation goes to the host tier
    for (Token t : tokens_from(100 + turn, 1)) conversation.push_back(t);
  }
  // 15 tokens at the end: one grid segment and one 7-token tail; the 3- to 6-token tails of the
  // earlier turns were covered by it and are gone.
  EXPECT_EQ(h.cache->stats().host.entries, 2);
  const auto earlier = std::vector<Token>(conversation.begin(), conversation.begin() + 13);
  EXPECT_EQ(PrefixCacheProbe(*h.cache).acquire({"ns", "a"}, concat(earlier, tokens_from(200, 1)), 1).reused, 13)
      << "an earlier turn is still restored token for token from the newer tail";
  h.check_cells("end");
}

// A client that sends each reply back in other words (or trims it): every turn's tail holds a
// reply the conversation did not keep. The tail of the next turn covers its prompt and drops it,
// so the tier holds one tail per conversation, not one per turn; a conversation that differs
// inside its prompt keeps its own.
TEST(CacheHost, ATailWhoseReplyTheConversationRewroteLeavesWithTheNextTurn) {
  CacheConfig config = small_config();
  config.device_cells = 0;
  Harness h(1024, config);
  auto prompt = tokens_from(0, 11);  // one 8-token segment and a tail
  for (int turn = 0; turn < 3; ++turn) {
    PrefixCacheProbe(*h.cache).acquire({"ns", "a"}, prompt, 0);
    const auto sequence = concat(prompt, tokens_from(300 + 10 * turn, 2));  // the server's own reply
    ASSERT_TRUE(h.feed(0, sequence, PrefixCacheProbe(*h.cache).locked_by(0), static_cast<int>(sequence.size())));
    h.cache->donate(0, sequence);
    h.cache->release_device_cells(1000);
    for (Token t : tokens_from(100 + turn, 1)) prompt.push_back(t);  // the reply rewritten, then the next turn
  }
  EXPECT_EQ(h.cache->stats().host.entries, 2) << "the grid segment and the last turn's tail";
  const auto last_prompt = std::vector<Token>(prompt.begin(), prompt.end() - 1);
  EXPECT_EQ(PrefixCacheProbe(*h.cache).acquire({"ns", "a"}, concat(last_prompt, tokens_from(200, 1)), 1).reused,
            static_cast<std::int32_t>(last_prompt.size()))
      << "the last turn's prompt is restored token for token";
  h.cache->release(1);
  // Another conversation with the same first 9 tokens: its tail's first token is the same, but its
  // prompt goes elsewhere after it, so neither tail covers the other's prompt.
  const auto other = concat(std::vector<Token>(prompt.begin(), prompt.begin() + 9), tokens_from(500, 3));
  PrefixCacheProbe(*h.cache).acquire({"ns", "b"}, other, 0);
  const auto other_sequence = concat(other, tokens_from(600, 2));
  ASSERT_TRUE(h.feed(0, other_sequence, PrefixCacheProbe(*h.cache).locked_by(0), static_cast<int>(other_sequence.size())));
  h.cache->donate(0, other_sequence);
  h.cache->release_device_cells(1000);
  EXPECT_EQ(h.cache->stats().host.entries, 3);
  EXPECT_EQ(PrefixCacheProbe(*h.cache).acquire({"ns", "a"}, concat(last_prompt, tokens_from(200, 1)), 1).reused,
            static_cast<std::int32_t>(last_prompt.size()));
  h.cache->release(1);
  h.check_cells("end");
}

// Random streams: up to four requests run at once, prompts share prefixes across sessions and two
// namespaces, requests finish in any order (some fail), and the context, device budget, holders
// and host budgets are all small enough to bind. Every invariant is checked after every operation,
// and the stream must reach every branch the test claims to cover.
TEST(CacheInvariants, RandomConcurrentStreamsKeepEveryInvariant) {
  CacheConfig config = small_config();
  config.device_cells = 48;
  config.host_capacity_bytes = 2400;
  config.host_max_segments = 24;
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Harness h(210, config);
    std::mt19937 rng(seed);
    std::vector<std::vector<Token>> bases;
    for (int i = 0; i < 4; ++i) bases.push_back(tokens_from(i * 41, 60));
    struct Running {
      RequestKey key;
      std::vector<Token> prompt;
      int fed = 0;
      bool waiting = false;
    };
    std::map<SeqId, Running> running;
    std::int64_t waits = 0, kv_full = 0, locked_during_release = 0, budget_peaks = 0;
    for (int step = 0; step < 800; ++step) {
      const int op = static_cast<int>(rng() % 10);
      std::vector<SeqId> free_slots;
      for (SeqId s = 0; s < kSlots; ++s) {
        if (!running.contains(s)) free_slots.push_back(s);
      }
      if (op < 4 && !free_slots.empty()) {
        const SeqId slot = free_slots[rng() % free_slots.size()];
        std::vector<Token> prompt = bases[rng() % bases.size()];
        prompt.resize(10 + rng() % 50);
        if (rng() % 3 == 0) prompt[rng() % prompt.size()] = static_cast<Token>(rng() % 250);
        for (int extra = static_cast<int>(rng() % 12); extra > 0; --extra) prompt.push_back(static_cast<Token>(rng() % 250));
        const RequestKey key{rng() % 5 == 0 ? "other" : "ns", "s" + std::to_string(rng() % 3)};
        const Acquisition got = PrefixCacheProbe(*h.cache).acquire(key, prompt, slot);
        waits += got.waiting ? 1 : 0;
        ASSERT_EQ(h.engine.sequence_tokens(slot), std::vector<Token>(prompt.begin(), prompt.begin() + got.reused))
            << "reused cells hold exactly the request's own tokens";
        running[slot] = Running{key, prompt, got.reused, got.waiting};
      } else if (op < 8 && !running.empty()) {
        auto it = std::next(running.begin(), static_cast<std::ptrdiff_t>(rng() % running.size()));
        Running& r = it->second;
        const int n = static_cast<int>(r.prompt.size());
        if (!r.waiting && r.fed < n) {
          const int to = std::min(n, r.fed + 1 + static_cast<int>(rng() % 30));
          if (!h.feed(it->first, r.prompt, r.fed, to)) {
            // No room: what the cache frees must be real, else the request gives up.
            kv_full += 1;
            const std::int64_t locked = h.cache->stats().device.locked_cells;
            const std::int64_t freed = h.cache->release_device_cells(to - r.fed);
            if (freed > 0 && locked > 0) locked_during_release += 1;
            h.check_cells("after a release for room");
            h.cache->release(it->first);
            running.erase(it);
          } else {
            r.fed = to;
          }
        }
      } else if (!running.empty()) {
        auto it = std::next(running.begin(), static_cast<std::ptrdiff_t>(rng() % running.size()));
        const Running& r = it->second;
        if (r.waiting || rng() % 6 == 0) {
          h.cache->release(it->first);
        } else {
          h.cache->donate(it->first, std::span<const Token>(r.prompt).first(static_cast<size_t>(r.fed)));
          budget_peaks += PrefixCacheProbe(*h.cache).budgeted_idle_cells() == *h.cache->config().device_cells ? 1 : 0;
          ASSERT_LE(PrefixCacheProbe(*h.cache).budgeted_idle_cells(), *h.cache->config().device_cells)
              << "idle cells besides the newest entry stay within the device budget";
        }
        running.erase(it);
      }
      for (const Resolved& r : h.cache->take_resolved()) {
        Running& w = running.at(r.seq);
        ASSERT_TRUE(w.waiting);
        ASSERT_EQ(h.engine.sequence_tokens(r.seq),
                  std::vector<Token>(w.prompt.begin(), w.prompt.begin() + r.acquisition.reused));
        w.waiting = false;
        w.fed = r.acquisition.reused;
      }
      h.check_cells("step " + std::to_string(step));
      const CacheStats s = h.cache->stats();
      ASSERT_LE(s.host.bytes, config.host_capacity_bytes);
      ASSERT_LE(s.host.entries, config.host_max_segments);
      ASSERT_LE(s.device.entries, kHolders);
      ASSERT_EQ(s.requests.running, static_cast<std::int64_t>(running.size()));
    }
    // Every branch this test claims to exercise was reached.
    const CacheStats s = h.cache->stats();
    EXPECT_GT(waits, 0) << "in-flight waits";
    EXPECT_GT(s.requests.inflight_shares, 0);
    EXPECT_GT(s.requests.outcomes[static_cast<size_t>(Outcome::hit_extend)], 0);
    EXPECT_GT(s.requests.outcomes[static_cast<size_t>(Outcome::partial)], 0);
    EXPECT_GT(s.requests.outcomes[static_cast<size_t>(Outcome::hit_restore)], 0);
    EXPECT_GT(s.device.demotions, 0) << "the device budget bound";
    EXPECT_GT(s.host.evictions_capacity + s.host.evictions_lru, 0) << "a host budget bound";
    EXPECT_GT(kv_full, 0) << "the context filled up";
    EXPECT_GT(locked_during_release, 0) << "cells were released while others were locked";
    EXPECT_GT(budget_peaks + s.device.demotions, 0);
  }
}

}  // namespace
}  // namespace prefixd::cache
