// The prompt cache for models whose memory cannot be cut back (recurrent, hybrid, window-only
// sliding window), over the FakeEngine imitating each: checkpoints are exact (a resumed sequence
// computes the logits a cold run computes), a divergent one is never restored, and the cache's
// invariants hold on random streams whose budgets bind.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "cache/checkpoint_store.h"
#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "support/fake_engine.h"

namespace prefixd::cache {
namespace {

using engine::ModelFamily;
using engine::SeqId;
using engine::Token;

std::vector<Token> tokens_from(int begin, int count) {
  std::vector<Token> out;
  for (int i = 0; i < count; ++i) out.push_back((begin + i) % 250);
  return out;
}

constexpr int kSlots = 3;
constexpr int kHolders = 4;
constexpr SeqId kScratch = kSlots + kHolders;

bool is_holder(SeqId s) { return s >= kSlots && s < kSlots + kHolders; }

struct Family {
  const char* name;
  ModelFamily family;
  std::int32_t window;
};

std::ostream& operator<<(std::ostream& os, const Family& f) { return os << f.name; }

struct Harness {
  engine::FakeEngine engine;
  std::unique_ptr<PrefixCache> cache;
  std::vector<float> last_logits;

  Harness(const Family& f, int n_ctx, CacheConfig config)
      : engine({.n_ctx = n_ctx, .n_batch = 16, .n_seq = kScratch + 1, .family = f.family,
                .sliding_window = f.window, .swa_full = false}) {
    std::vector<SeqId> holders;
    for (int i = 0; i < kHolders; ++i) holders.push_back(kSlots + i);
    cache = std::make_unique<PrefixCache>(engine, config, holders, kScratch);
  }

  // Feeds tokens[from, to) of `seq` the way the scheduler does: chunks end where the cache takes a
  // checkpoint. The last token's logits are kept. False when the context had no room.
  bool feed(SeqId seq, const std::vector<Token>& tokens, int from, int to) {
    int i = from;
    while (i < to) {
      int end = std::min(to, i + engine.batch_size());
      if (const int stop = cache->next_stop(seq); stop > i) end = std::min(end, stop);
      std::vector<engine::BatchToken> batch;
      for (int j = i; j < end; ++j) batch.push_back({tokens[static_cast<size_t>(j)], j, seq, j + 1 == end});
      if (engine.decode(batch) != engine::DecodeStatus::ok) return false;
      const auto logits = engine.logits(static_cast<std::int32_t>(batch.size()) - 1);
      last_logits.assign(logits.begin(), logits.end());
      cache->advance(seq, end);
      i = end;
    }
    return true;
  }

  // A sequence resumed at `reused` must compute, for its next token, exactly what a cold run over
  // the same tokens computes: its attention cells and its state both stand for prompt[0, reused).
  void expect_exact(SeqId seq, const std::vector<Token>& prompt, int reused, const std::string& where) {
    ASSERT_TRUE(feed(seq, prompt, reused, reused + 1)) << where;
    ASSERT_EQ(last_logits, engine.logits_for_history(std::span<const Token>(prompt).first(static_cast<size_t>(reused) + 1)))
        << where << ": resumed at " << reused;
  }

  void check(const std::string& where) const {
    const auto any_holder = [](const std::set<SeqId>& o) { return std::ranges::any_of(o, is_holder); };
    ASSERT_EQ(engine.count_cells(any_holder), PrefixCacheProbe(*cache).device_cells()) << where;
    ASSERT_EQ(engine.count_cells([](const auto& o) { return o.contains(kScratch); }), 0) << where;
    ASSERT_EQ(PrefixCacheProbe(*cache).verify(), "") << where;
  }
};

CacheConfig small_config() {
  CacheConfig c{.min_prefix = 4, .block_size = 4, .host_segment_tokens = 8, .host_capacity_bytes = 1 << 20,
                .device_cells = 1 << 20};
  c.checkpoint_every = 0;
  return c;
}

class Checkpoints : public ::testing::TestWithParam<Family> {};

TEST_P(Checkpoints, ResendNextTurnAndEditResumeExactlyWhereTheStateExists) {
  CacheConfig config = small_config();
  config.device_cells = 0;  // entries are demoted: attention from the host tier, state from checkpoints
  Harness h(GetParam(), 1024, config);
  const auto system = tokens_from(0, 30);
  auto turn1 = system;
  for (Token t : tokens_from(100, 20)) turn1.push_back(t);
  RequestKey key{"ns", "alice", {30}};
  ASSERT_EQ(PrefixCacheProbe(*h.cache).acquire(key, turn1, 0).reused, 0);
  ASSERT_TRUE(h.feed(0, turn1, 0, 50));
  h.cache->donate(0, turn1);
  h.check("after turn 1");

  // An identical resend resumes before its last token.
  Acquisition got = PrefixCacheProbe(*h.cache).acquire(key, turn1, 1);
  EXPECT_EQ(got.reused, 49);
  h.expect_exact(1, turn1, 49, "resend");
  h.cache->release(1);

  // The next turn extends the whole previous prompt.
  auto turn2 = turn1;
  for (Token t : tokens_from(160, 25)) turn2.push_back(t);
  got = PrefixCacheProbe(*h.cache).acquire(key, turn2, 1);
  EXPECT_EQ(got.reused, 50);
  h.expect_exact(1, turn2, 50, "next turn");
  ASSERT_TRUE(h.feed(1, turn2, 51, 75));
  h.cache->donate(1, turn2);
  h.check("after turn 2");

  // An edit inside the first user turn resumes at the boundary before it, not at the edit.
  auto edited = turn2;
  edited[40] = 249;
  got = PrefixCacheProbe(*h.cache).acquire(key, edited, 2);
  EXPECT_EQ(got.reused, 30);
  h.expect_exact(2, edited, 30, "edit");
  h.cache->release(2);

  // Another session with the same system prompt resumes after it.
  auto other = system;
  for (Token t : tokens_from(200, 10)) other.push_back(t);
  got = PrefixCacheProbe(*h.cache).acquire({"ns", "bob", {30}}, other, 2);
  EXPECT_EQ(got.reused, 30);
  h.expect_exact(2, other, 30, "second session");
  h.cache->release(2);

  // The same tokens under another namespace find nothing.
  EXPECT_EQ(PrefixCacheProbe(*h.cache).acquire({"other", "alice", {30}}, turn2, 2).reused, 0);
  h.cache->release(2);
  h.check("end");
  const CacheStats s = h.cache->stats();
  EXPECT_EQ(s.reuse_mode, "checkpoints");
  EXPECT_GE(s.checkpoints.restored, 3);
  EXPECT_GT(s.checkpoints.bytes, 0u);
}

// A system prompt that no turn boundary ends (templates that fold it into the first user turn):
// the second conversation takes a checkpoint where it leaves the first, and the third resumes there.
TEST_P(Checkpoints, AConversationCheckpointsWhereItLeavesAnotherAndTheNextResumesThere) {
  Harness h(GetParam(), 1024, small_config());
  const auto system = tokens_from(0, 30);
  const auto conversation = [&](int begin) {
    auto prompt = system;
    for (Token t : tokens_from(begin, 20)) prompt.push_back(t);
    return prompt;
  };
  const auto a = conversation(100);
  ASSERT_EQ(PrefixCacheProbe(*h.cache).acquire({"ns", "a", {}}, a, 0).reused, 0);
  ASSERT_TRUE(h.feed(0, a, 0, 50));
  h.cache->donate(0, a);

  const auto b = conversation(150);
  const Acquisition second = PrefixCacheProbe(*h.cache).acquire({"ns", "b", {}}, b, 0);
  EXPECT_EQ(h.cache->next_stop(0), second.reused < 30 ? 30 : 49) << "a stop where b leaves a";
  ASSERT_TRUE(h.feed(0, b, second.reused, 50));
  h.cache->donate(0, b);
  h.check("after b");

  const auto c = conversation(200);
  const Acquisition third = PrefixCacheProbe(*h.cache).acquire({"ns", "c", {}}, c, 1);
  EXPECT_EQ(third.reused, 30);
  h.expect_exact(1, c, 30, "third conversation");
  h.cache->release(1);
  h.check("end");
}

TEST_P(Checkpoints, ACheckpointPastADifferenceIsNeverRestored) {
  Harness h(GetParam(), 1024, small_config());
  const auto a = tokens_from(0, 60);
  PrefixCacheProbe(*h.cache).acquire({"ns", "s", {20, 40}}, a, 0);
  ASSERT_TRUE(h.feed(0, a, 0, 60));
  h.cache->release(0);  // nothing on the device: only the checkpoints at 20, 40, 59 and 60
  for (int diff : {5, 25, 45, 58}) {
    auto b = a;
    b[static_cast<size_t>(diff)] = 249;
    const Acquisition got = PrefixCacheProbe(*h.cache).acquire({"ns", "s", {}}, b, 1);
    EXPECT_LE(got.reused, diff) << "difference at " << diff;
    if (got.reused > 0) h.expect_exact(1, b, got.reused, "difference at " + std::to_string(diff));
    h.cache->release(1);
  }
  EXPECT_GT(h.cache->stats().checkpoints.refusals_diverged, 0) << "the session's longer checkpoints were refused";
  h.check("end");
}

// Random streams of concurrent requests sharing prefixes, with budgets (device cells, holders,
// host bytes, checkpoint bytes, the context) small enough to bind. After every acquisition the
// resumed sequence must compute cold logits; every invariant is checked after every operation.
TEST_P(Checkpoints, RandomStreamsResumeExactlyAndKeepEveryInvariant) {
  CacheConfig config = small_config();
  config.device_cells = 40;
  config.host_capacity_bytes = 3000;
  config.checkpoint_every = 16;
  config.checkpoints_per_session = 6;
  std::int64_t whole_entry_hits = 0, checkpoint_hits = 0, kv_full = 0;
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Harness probe(GetParam(), 150, config);
    const std::size_t one_state = probe.engine.save_checkpoint(0).size();
    config.checkpoint_capacity_bytes = std::max<std::uint64_t>(one_state * 12, 600);
    Harness h(GetParam(), 150, config);
    std::mt19937 rng(seed);
    std::vector<std::vector<Token>> bases;
    for (int i = 0; i < 3; ++i) bases.push_back(tokens_from(i * 37, 70));
    struct Running {
      std::vector<Token> prompt;
      int fed = 0;
    };
    std::map<SeqId, Running> running;
    for (int step = 0; step < 600; ++step) {
      const int op = static_cast<int>(rng() % 10);
      std::vector<SeqId> free_slots;
      for (SeqId s = 0; s < kSlots; ++s) {
        if (!running.contains(s)) free_slots.push_back(s);
      }
      if (op < 4 && !free_slots.empty()) {
        const SeqId slot = free_slots[rng() % free_slots.size()];
        std::vector<Token> prompt = bases[rng() % bases.size()];
        prompt.resize(12 + rng() % 58);
        if (rng() % 3 == 0) prompt[rng() % prompt.size()] = static_cast<Token>(rng() % 250);
        for (int extra = static_cast<int>(rng() % 10); extra > 0; --extra) prompt.push_back(static_cast<Token>(rng() % 250));
        std::vector<engine::Pos> boundaries;
        for (engine::Pos b : {10, 24, 40}) {
          if (b < static_cast<engine::Pos>(prompt.size())) boundaries.push_back(b);
        }
        const RequestKey key{rng() % 5 == 0 ? "other" : "ns", "s" + std::to_string(rng() % 3), boundaries};
        const Acquisition got = PrefixCacheProbe(*h.cache).acquire(key, prompt, slot);
        ASSERT_FALSE(got.waiting) << "checkpoint families do not wait for a running request";
        ASSERT_LT(got.reused, static_cast<std::int32_t>(prompt.size()));
        whole_entry_hits += got.outcome == Outcome::hit_extend ? 1 : 0;
        checkpoint_hits += got.outcome == Outcome::hit_restore || got.outcome == Outcome::partial ? 1 : 0;
        running[slot] = Running{prompt, got.reused};
        if (got.reused > 0) {
          if (!h.feed(slot, prompt, got.reused, got.reused + 1)) {
            h.cache->release(slot);
            running.erase(slot);
            kv_full += 1;
          } else {
            ASSERT_EQ(h.last_logits, h.engine.logits_for_history(std::span<const Token>(prompt).first(
                                         static_cast<size_t>(got.reused) + 1)))
                << "step " << step << ": resumed at " << got.reused << " (" << outcome_name(got.outcome) << ")";
            running[slot].fed = got.reused + 1;
          }
        }
      } else if (op < 8 && !running.empty()) {
        auto it = std::next(running.begin(), static_cast<std::ptrdiff_t>(rng() % running.size()));
        Running& r = it->second;
        const int n = static_cast<int>(r.prompt.size());
        if (r.fed < n) {
          const int to = std::min(n, r.fed + 1 + static_cast<int>(rng() % 30));
          if (!h.feed(it->first, r.prompt, r.fed, to)) {
            kv_full += 1;
            h.cache->release_device_cells(to - r.fed);
            h.check("after a release for room");
            h.cache->release(it->first);
            running.erase(it);
          } else {
            r.fed = to;
          }
        }
      } else if (!running.empty()) {
        auto it = std::next(running.begin(), static_cast<std::ptrdiff_t>(rng() % running.size()));
        if (rng() % 6 == 0) {
          h.cache->release(it->first);
        } else {
          h.cache->donate(it->first, std::span<const Token>(it->second.prompt).first(static_cast<size_t>(it->second.fed)));
        }
        running.erase(it);
      }
      h.check("step " + std::to_string(step));
      const CacheStats s = h.cache->stats();
      ASSERT_LE(s.checkpoints.bytes, config.checkpoint_capacity_bytes);
      ASSERT_LE(s.host.bytes, config.host_capacity_bytes);
      ASSERT_LE(s.device.entries, kHolders);
    }
    const CacheStats s = h.cache->stats();
    EXPECT_GT(s.checkpoints.restored, 0);
    EXPECT_GT(s.checkpoints.evictions_capacity + s.checkpoints.superseded, 0) << "a checkpoint budget bound";
    EXPECT_GT(s.checkpoints.refusals_diverged, 0);
    EXPECT_GT(s.device.demotions, 0) << "the device budget bound";
  }
  EXPECT_GT(whole_entry_hits, 0) << "a request extended a device entry with its state";
  EXPECT_GT(checkpoint_hits, 0);
  if (GetParam().family != ModelFamily::recurrent) {
    EXPECT_GT(kv_full, 0) << "the context filled up";  // a recurrent model has no cells to fill
  }
}

// Running requests whose prompts outnumber the context's positions ask the cache for room: a
// recurrent model has no cells to free, and a device entry part of which a running request resumed
// from (that part's path locked) is never dropped from under the lock. On a recurrent model the
// server aborted here (the tree's locked node left without an entry) with 4 sessions of ~2,000
// tokens in 8,192.
TEST_P(Checkpoints, RoomAskedForWhileARequestUsesPartOfAnEntryKeepsItsLock) {
  Harness h(GetParam(), 256, small_config());
  const RequestKey key{"ns", "alice", {30}};
  const auto first = tokens_from(0, 40);
  ASSERT_EQ(PrefixCacheProbe(*h.cache).acquire(key, first, 0).reused, 0);
  ASSERT_TRUE(h.feed(0, first, 0, 40));
  h.cache->donate(0, first);
  // Two requests extend the entry at once; the first to finish leaves a longer entry, part of
  // which the other still runs on.
  auto one = first, two = first;
  for (Token t : tokens_from(90, 20)) one.push_back(t);
  for (Token t : tokens_from(150, 20)) two.push_back(t);
  ASSERT_EQ(PrefixCacheProbe(*h.cache).acquire(key, one, 1).reused, 40);
  ASSERT_EQ(PrefixCacheProbe(*h.cache).acquire(key, two, 2).reused, 40);
  ASSERT_TRUE(h.feed(1, one, 40, 60));
  ASSERT_TRUE(h.feed(2, two, 40, 60));
  h.cache->donate(1, one);
  h.check("one extension donated, the other running");
  // More running positions than the context holds.
  h.cache->make_room_for_step(1000);
  h.check("after room was asked for");
  if (GetParam().family == ModelFamily::recurrent) {
    EXPECT_EQ(h.cache->stats().device.demotions + h.cache->stats().device.evictions, 0) << "a recurrent model has no cells to free";
  }
  h.cache->donate(2, two);
  h.check("after the second donation");
  EXPECT_EQ(PrefixCacheProbe(*h.cache).acquire(key, two, 0).reused, 59);
  h.cache->release(0);
  h.check("end");
}

INSTANTIATE_TEST_SUITE_P(Families, Checkpoints,
                         ::testing::Values(Family{"hybrid", ModelFamily::hybrid, 0},
                                           Family{"recurrent", ModelFamily::recurrent, 0},
                                           Family{"window_only", ModelFamily::sliding_window, 8}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(CheckpointStore, KeysNameTheWholePrefixAndChainsStayBounded) {
  BlockHasher hasher(CacheConfig{}.hash, 4);
  CheckpointStore store(hasher, 1000, 10, 2);
  const auto a = tokens_from(0, 20);
  auto b = a;
  b[2] = 249;  // differs inside the first block
  const auto chain_a = hasher.chain("ns", a);
  const auto chain_b = hasher.chain("ns", b);
  ASSERT_TRUE(store.save(Lineage{"ns"}, std::span<const Token>(a).first(10), chain_a, engine::Bytes(100, 1), "s", CheckpointKind::boundary));
  EXPECT_EQ(store.find(Lineage{"ns"}, a, chain_a, 20).position, 10);
  EXPECT_EQ(store.find(Lineage{"ns"}, a, chain_a, 9).position, 0) << "beyond the limit";
  EXPECT_EQ(store.find(Lineage{"ns"}, b, chain_b, 20).position, 0) << "a prefix that differs anywhere finds nothing";
  EXPECT_EQ(store.find(Lineage{"other"}, a, hasher.chain("other", a), 20).position, 0);
  // The session's chain holds two; the third link pushes the oldest out, and with it its state.
  ASSERT_TRUE(store.save(Lineage{"ns"}, std::span<const Token>(a).first(14), chain_a, engine::Bytes(100, 2), "s", CheckpointKind::boundary));
  ASSERT_TRUE(store.save(Lineage{"ns"}, std::span<const Token>(a).first(18), chain_a, engine::Bytes(100, 3), "s", CheckpointKind::boundary));
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.stats().superseded, 1);
  EXPECT_EQ(store.find(Lineage{"ns"}, a, chain_a, 13).position, 0);
  // Refusal causes: b does not have the session's prefixes.
  EXPECT_EQ(store.classify_refusal("s", Lineage{"ns"}, b, chain_b, 0), Refusal::diverged);
  store.erase(store.find(Lineage{"ns"}, a, chain_a, 20).key);
  EXPECT_EQ(store.classify_refusal("s", Lineage{"ns"}, a, chain_a, 14), Refusal::evicted);
  EXPECT_EQ(store.classify_refusal("s", Lineage{"x"}, a, chain_a, 0), Refusal::ns);
  EXPECT_EQ(store.verify(), "");
  // The byte budget: 10 states of 100 bytes fit, the eleventh evicts the least recently used.
  for (int i = 0; i < 11; ++i) {
    const auto p = tokens_from(100 + i * 3, 8);
    ASSERT_TRUE(store.save(Lineage{"ns"}, p, hasher.chain("ns", p), engine::Bytes(100, 4), "", CheckpointKind::boundary));
  }
  EXPECT_LE(store.bytes(), 1000u);
  EXPECT_GT(store.stats().evictions_capacity + store.stats().evictions_lru, 0);
  EXPECT_EQ(store.verify(), "");
}

TEST(CheckpointStore, ATailLeavesTheChainOnceTheSessionMovesPastItButATurnBoundaryStays) {
  BlockHasher hasher(CacheConfig{}.hash, 4);
  CheckpointStore store(hasher, 1 << 20, 100, 32);
  const auto a = tokens_from(0, 40);
  const auto chain = hasher.chain("ns", a);
  const auto prefix = [&](int n) { return std::span<const Token>(a).first(static_cast<size_t>(n)); };
  ASSERT_TRUE(store.save(Lineage{"ns"}, prefix(10), chain, engine::Bytes(50, 1), "s", CheckpointKind::boundary));  // a turn boundary
  ASSERT_TRUE(store.save(Lineage{"ns"}, prefix(19), chain, engine::Bytes(50, 2), "s", CheckpointKind::prompt_end));   // the prompt's end - 1
  ASSERT_TRUE(store.save(Lineage{"ns"}, prefix(20), chain, engine::Bytes(50, 3), "s", CheckpointKind::prompt_end));   // the prompt's end
  EXPECT_EQ(store.size(), 3u);
  // The next turn extends the prompt: its own tail supersedes both tails, not the boundary.
  ASSERT_TRUE(store.save(Lineage{"ns"}, prefix(35), chain, engine::Bytes(50, 4), "s", CheckpointKind::prompt_end));
  EXPECT_EQ(store.stats().superseded, 2);
  EXPECT_EQ(store.find(Lineage{"ns"}, a, chain, 34).position, 10);
  EXPECT_EQ(store.find(Lineage{"ns"}, a, chain, 40).position, 35);
  // Another session's tail on a different continuation is not touched.
  auto b = tokens_from(0, 30);
  b[25] = 249;
  const auto chain_b = hasher.chain("ns", b);
  ASSERT_TRUE(store.save(Lineage{"ns"}, std::span<const Token>(b).first(28), chain_b, engine::Bytes(50, 5), "t", CheckpointKind::prompt_end));
  ASSERT_TRUE(store.save(Lineage{"ns"}, prefix(38), chain, engine::Bytes(50, 6), "s", CheckpointKind::prompt_end));
  EXPECT_EQ(store.find(Lineage{"ns"}, b, chain_b, 30).position, 28);
  EXPECT_EQ(store.verify(), "");
}

}  // namespace
}  // namespace prefixd::cache
