// The cache's request-life face (cache/request_life.h) without a shared tier: admission makes room
// before it acquires, uses nothing when the prompt does not fit, counts requests that bypass the
// cache, hands waiting sequences their prefix, and the idle tick expires and compacts. (With a
// shared tier: tests/integration/request_life_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "support/fake_engine.h"

namespace prefixd::cache {
namespace {

using engine::SeqId;
using engine::Token;

constexpr SeqId kScratch = 7;  // slots 0-1, holders 2-6

std::vector<Token> tokens_from(int begin, int count) {
  std::vector<Token> out;
  for (int i = 0; i < count; ++i) out.push_back((begin + i) % 250);
  return out;
}

std::vector<Token> concat(std::vector<Token> a, const std::vector<Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Life {
  engine::FakeEngine engine;
  PrefixCache cache;

  explicit Life(int n_ctx, CacheConfig config = small_config())
      : engine({.n_ctx = n_ctx, .n_batch = 16, .n_seq = 8}),
        cache(engine, config, std::vector<SeqId>{2, 3, 4, 5, 6}, kScratch) {}

  static CacheConfig small_config() {
    return CacheConfig{.min_prefix = 4, .block_size = 4, .host_segment_tokens = 8, .host_capacity_bytes = 1 << 20,
                       .device_cells = 1 << 20};
  }

  RequestLife& life() { return cache; }

  // Computes prompt[from, to) in `seq`, a batch at a time.
  void feed(SeqId seq, const std::vector<Token>& prompt, int from, int to) {
    for (int i = from; i < to; i += engine.batch_size()) {
      const int end = std::min(to, i + engine.batch_size());
      std::vector<engine::BatchToken> batch;
      for (int j = i; j < end; ++j) batch.push_back({prompt[static_cast<size_t>(j)], j, seq, false});
      ASSERT_EQ(engine.decode(batch), engine::DecodeStatus::ok);
      life().advance(seq, end);
    }
  }

  // A whole request: opened, admitted, computed and donated.
  void serve(const RequestKey& key, const std::vector<Token>& prompt, SeqId seq = 0) {
    Ticket ticket = life().open(key, prompt, 0, [] {});
    const Admission got = life().admit(ticket, seq, Room{.need = static_cast<std::int64_t>(prompt.size()) + 1});
    ASSERT_EQ(got.kind, Admission::Kind::ready);
    feed(seq, prompt, got.acquisition.reused, static_cast<int>(prompt.size()));
    life().donate(seq, prompt);
  }
};

TEST(RequestLife, AdmissionMakesRoomFirstAndUsesNothingWhenThePromptDoesNotFit) {
  Life l(128);
  const auto a = tokens_from(0, 50);
  l.serve({"ns", ""}, a);
  ASSERT_EQ(PrefixCacheProbe(l.cache).device_cells(), 50);
  const auto b = tokens_from(100, 100);
  Ticket ticket = l.life().open({"ns", ""}, b, 0, [] {});
  // 50 idle entry cells + 101 needed: more than 128, but the idle entry can give way.
  const Admission fits = l.life().admit(ticket, 0, Room{.need = 101});
  ASSERT_EQ(fits.kind, Admission::Kind::ready);
  EXPECT_EQ(fits.acquisition.outcome, Outcome::cold);
  EXPECT_LE(PrefixCacheProbe(l.cache).device_cells() + 101, 128) << "idle entry cells gave way";
  EXPECT_EQ(l.cache.stats().requests.running, 1);

  // A second prompt beside the running one does not fit, and nothing is idle to free.
  Ticket second = l.life().open({"ns", ""}, a, 0, [] {});
  const Admission full = l.life().admit(second, 1, Room{.running = 101, .need = 51});
  EXPECT_EQ(full.kind, Admission::Kind::full);
  EXPECT_EQ(l.cache.stats().requests.running, 1) << "nothing registered";
  EXPECT_TRUE(l.engine.sequence_positions(1).empty());
  // The same ticket with nothing running is admitted anyway (alone, it can only fail alone).
  EXPECT_EQ(l.life().admit(second, 1, Room{.running = 101, .need = 51, .nothing_running = true}).kind,
            Admission::Kind::ready);
  EXPECT_THROW(l.life().admit(second, 1, Room{}), std::logic_error) << "a spent ticket";
  l.life().release(0);
  l.life().release(1);
  EXPECT_EQ(PrefixCacheProbe(l.cache).verify(), "");
}

TEST(RequestLife, ABypassTicketOnlyMakesRoomAndIsCounted) {
  Life l(128);
  l.serve({"ns", ""}, tokens_from(0, 50));
  Ticket ticket = l.life().open_bypass(ScopeId{});
  const Admission got = l.life().admit(ticket, 0, Room{.need = 101});
  ASSERT_EQ(got.kind, Admission::Kind::ready);
  EXPECT_EQ(got.acquisition.outcome, Outcome::bypass);
  EXPECT_LE(PrefixCacheProbe(l.cache).device_cells() + 101, 128) << "room was made for it";
  EXPECT_EQ(l.cache.stats().requests.running, 0) << "nothing registered";
  EXPECT_EQ(l.cache.stats().requests.outcomes[static_cast<size_t>(Outcome::bypass)], 1);
}

TEST(RequestLife, AWaitingSequenceIsHandedItsPrefixOnceItIsComputed) {
  Life l(1024);
  const auto system = tokens_from(0, 64);
  auto a = system;
  auto b = system;
  for (Token t : tokens_from(100, 5)) a.push_back(t);
  for (Token t : tokens_from(120, 7)) b.push_back(t);
  Ticket first = l.life().open({"ns", "a"}, a, 0, [] {});
  ASSERT_EQ(l.life().admit(first, 0, Room{.need = 70}).kind, Admission::Kind::ready);
  Ticket second = l.life().open({"ns", "b"}, b, 0, [] {});
  const Admission waits = l.life().admit(second, 1, Room{.running = 70, .need = 72});
  ASSERT_EQ(waits.kind, Admission::Kind::waits_for_prefix);
  EXPECT_TRUE(waits.acquisition.waiting);
  l.feed(0, a, 0, 32);
  EXPECT_TRUE(l.life().take_resolved().empty()) << "half the prefix is not enough";
  l.feed(0, a, 32, static_cast<int>(a.size()));
  const std::vector<Resolved> ready = l.life().take_resolved();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].seq, 1);
  EXPECT_EQ(ready[0].acquisition.reused, 64);
  EXPECT_TRUE(l.life().take_resolved().empty()) << "each is returned once";
  l.life().donate(0, a);
  l.life().release(1);
  EXPECT_EQ(PrefixCacheProbe(l.cache).verify(), "");
}

TEST(RequestLife, AbandoningATicketWithoutALookupChangesNothing) {
  Life l(256);
  const CacheStats before = l.cache.stats();
  Ticket ticket = l.life().open({"ns", ""}, tokens_from(0, 40), 0, [] {});
  l.life().abandon(ticket);
  EXPECT_EQ(l.cache.stats().remote.fetch_timeouts, before.remote.fetch_timeouts);
  EXPECT_EQ(l.cache.stats().requests.running, 0);
  EXPECT_THROW(l.life().admit(ticket, 0, Room{}), std::logic_error) << "an abandoned ticket is spent";
}

TEST(RequestLife, TheTickExpiresAtOnceAndThenAtMostOnceASecond) {
  CacheConfig config = Life::small_config();
  config.ttl = std::chrono::seconds(0);
  Life l(256, config);
  l.serve({"ns", "a"}, tokens_from(0, 30));
  const auto first = std::chrono::steady_clock::now();
  EXPECT_EQ(l.life().tick(false), 0);
  EXPECT_EQ(l.cache.stats().device.entries, 0) << "the first tick expires";
  l.serve({"ns", "b"}, tokens_from(100, 30));
  l.life().tick(false);
  if (std::chrono::steady_clock::now() - first < std::chrono::milliseconds(900)) {  // a stalled machine
    EXPECT_EQ(l.cache.stats().device.entries, 1) << "not again within the second";
  }
}

TEST(RequestLife, TheTickCompactsOnlyWhenNothingRuns) {
  CacheConfig config = Life::small_config();
  config.compaction = Compaction::idle;
  Life l(256, config);
  l.serve({"ns", "a"}, tokens_from(0, 30));
  EXPECT_EQ(l.life().tick(/*nothing_running=*/false), 0) << "others may hold cells the cache does not know of";
  EXPECT_EQ(l.life().tick(true), 30);
  EXPECT_EQ(l.cache.stats().device.compactions, 1);
}

TEST(RequestLife, RoomForAStepFreesIdleCellsForOneMoreCell) {
  Life l(64);
  l.serve({"ns", ""}, tokens_from(0, 40));
  ASSERT_EQ(PrefixCacheProbe(l.cache).device_cells(), 40);
  l.life().make_room_for_step(20);
  EXPECT_EQ(PrefixCacheProbe(l.cache).device_cells(), 40) << "61 cells fit in 64";
  l.life().make_room_for_step(30);
  EXPECT_LT(PrefixCacheProbe(l.cache).device_cells(), 40) << "71 do not: idle cells gave way";
  EXPECT_LE(PrefixCacheProbe(l.cache).device_cells() + 30 + 1, 64);
}

// Many conversations, few slots: the request already queued for a conversation needs its history
// soonest. Its host segments stay while it waits; others' go first, even newer ones. Once it is
// admitted (or gives up) they are ordinary segments again.
TEST(RequestLife, AQueuedRequestsHistoryOutlastsNewerSegmentsWhileItWaits) {
  CacheConfig config = Life::small_config();
  config.device_cells = 0;
  std::uint64_t per_segment = 0;
  {
    Life probe(256, config);
    probe.serve({"ns", "a"}, tokens_from(0, 16));
    probe.cache.release_device_cells(1000);
    per_segment = probe.cache.stats().host.bytes / 2;
  }
  ASSERT_GT(per_segment, 0u);
  config.host_capacity_bytes = per_segment * 4;  // four 8-token segments: two conversations
  const auto a = tokens_from(0, 16);
  const auto a_next = concat(a, tokens_from(40, 4));
  for (const bool queued_first : {true, false}) {
    SCOPED_TRACE(queued_first ? "queued before the others ran" : "queued after the others ran");
    Life l(256, config);
    l.serve({"ns", "a"}, a);
    l.cache.release_device_cells(1000);
    std::optional<Ticket> waiting;
    if (queued_first) waiting.emplace(l.life().open({"ns", "a"}, a_next, 0, [] {}));
    for (const int start : {100, 150}) {  // two other conversations run meanwhile, and leave
      l.serve({"ns", std::to_string(start)}, tokens_from(start, 16), 1);
      l.cache.release_device_cells(1000);
    }
    if (!waiting) waiting.emplace(l.life().open({"ns", "a"}, a_next, 0, [] {}));
    const Admission got = l.life().admit(*waiting, 0, Room{.need = static_cast<std::int64_t>(a_next.size()) + 1});
    ASSERT_EQ(got.kind, Admission::Kind::ready);
    EXPECT_EQ(got.acquisition.reused, queued_first ? 16 : 0);
    EXPECT_EQ(PrefixCacheProbe(l.cache).verify(), "");
  }
}

}  // namespace
}  // namespace prefixd::cache
