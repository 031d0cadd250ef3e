// Prompt-cache lookup cost at scale: acquire + donate (+ release) latency with the host tier
// holding about 100,000 segments; and what the KV event refresh (PrefixCache::take_kv_events, run
// by the scheduler at most every --kv-events-interval-ms while requests run) costs at that scale.
//
// The engine is the model-free FakeEngine with a small context: its sequence operations scan every
// cell, so a small n_ctx keeps the engine's share of each operation small and the numbers are
// dominated by the cache's own work (hashing, tree and host-store lookups, LRU upkeep).
//
// The stored prompts form a conversation tree: 4 levels of 16-token segments, 18 branches per
// level (18^4 = 104,976 prompts, 111,150 host segments), populated by real requests (acquire,
// compute, donate), so the host tier is built by the same demotions a server performs. A second
// shape puts 10,000 prompts side by side under the root, the worst case for the host tier's
// sibling comparison, to show how that part scales.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "support/fake_engine.h"
#include "micro_util.h"

namespace prefixd::micro {
namespace {

using engine::SeqId;
using engine::Token;

constexpr SeqId kSlot = 0;
constexpr SeqId kScratch = 6;
constexpr std::int32_t kSegmentTokens = 16;  // = the block size: every segment is one block
const cache::RequestKey kKey{"micro-namespace", ""};

// The 16 tokens of the segment at `level` with branch number `digit`. Siblings differ in their
// first token, as distinct conversations do, so the host tier's token comparison stops early.
std::vector<Token> segment(std::int32_t level, std::int64_t digit) {
  std::vector<Token> out(kSegmentTokens);
  out[0] = static_cast<Token>(digit % 256);
  out[1] = static_cast<Token>(digit / 256 % 256);
  for (std::int32_t k = 2; k < kSegmentTokens; ++k) {
    out[static_cast<std::size_t>(k)] = static_cast<Token>((level * 31 + k * 7 + digit * 13) % 256);
  }
  return out;
}

// Prompts as paths in a tree with fanout[l] branches at level l; prompt i is i in mixed radix.
class PromptTree {
 public:
  explicit PromptTree(std::vector<std::int64_t> fanout) : fanout_(std::move(fanout)) {}

  std::int64_t size() const {
    std::int64_t n = 1;
    for (std::int64_t f : fanout_) n *= f;
    return n;
  }
  std::int32_t levels() const { return static_cast<std::int32_t>(fanout_.size()); }
  std::int64_t fanout(std::int32_t level) const { return fanout_[static_cast<std::size_t>(level)]; }

  std::vector<Token> prompt(std::int64_t index) const {
    std::vector<std::int64_t> digits(fanout_.size());
    for (std::size_t l = fanout_.size(); l-- > 0;) {
      digits[l] = index % fanout_[l];
      index /= fanout_[l];
    }
    std::vector<Token> out;
    for (std::size_t l = 0; l < digits.size(); ++l) append(out, segment(static_cast<std::int32_t>(l), digits[l]));
    return out;
  }

  static void append(std::vector<Token>& to, const std::vector<Token>& part) { to.insert(to.end(), part.begin(), part.end()); }

 private:
  std::vector<std::int64_t> fanout_;
};

// A FakeEngine and a PrefixCache whose host tier holds every prompt of a PromptTree.
class PopulatedCache {
 public:
  explicit PopulatedCache(std::vector<std::int64_t> fanout)
      : engine_({.n_ctx = 512, .n_batch = 64, .n_seq = 8}), tree_(std::move(fanout)) {
    cache::CacheConfig config;
    config.min_prefix = kSegmentTokens;
    config.block_size = kSegmentTokens;
    config.host_segment_tokens = kSegmentTokens;
    config.host_max_segments = 1 << 20;
    config.host_capacity_bytes = 4ull << 30;
    config.device_cells = 0;  // the CPU default: everything but the newest entry lives on the host
    config.compaction = cache::Compaction::never;
    cache_ = std::make_unique<cache::PrefixCache>(engine_, config, std::vector<SeqId>{2, 3, 4, 5}, kScratch);

    const auto start = Clock::now();
    // In tree order, as a server sees a conversation tree grow: each request restores its parent's
    // prefix from the host tier and computes one new segment.
    for (std::int64_t i = 0; i < tree_.size(); ++i) run_request(tree_.prompt(i), /*donate=*/true);
    setup_seconds_ = seconds_between(start, Clock::now());
  }

  struct Timings {
    double acquire = 0;
    double end = 0;  // donate or release
    cache::Acquisition got;
  };

  // One request's life; only the cache's calls are timed, not the engine computing the rest.
  Timings run_request(const std::vector<Token>& prompt, bool donate) {
    Timings t;
    const auto a0 = Clock::now();
    t.got = cache::PrefixCacheProbe(*cache_).acquire(kKey, prompt, kSlot);
    const auto a1 = Clock::now();
    if (t.got.waiting) throw std::logic_error("a lone request never waits");
    compute(engine_, kSlot, prompt, t.got.reused);
    cache_->advance(kSlot, static_cast<std::int32_t>(prompt.size()));
    const auto e0 = Clock::now();
    if (donate) {
      cache_->donate(kSlot, prompt);
    } else {
      cache_->release(kSlot);
    }
    const auto e1 = Clock::now();
    t.acquire = seconds_between(a0, a1);
    t.end = seconds_between(e0, e1);
    return t;
  }

  const PromptTree& tree() const { return tree_; }
  const cache::PrefixCache& cache() const { return *cache_; }
  cache::PrefixCache& cache() { return *cache_; }
  double setup_seconds() const { return setup_seconds_; }

 private:
  engine::FakeEngine engine_;
  PromptTree tree_;
  std::unique_ptr<cache::PrefixCache> cache_;
  double setup_seconds_ = 0;
};

enum Shape : std::int64_t { kConversationTree = 0, kFlat = 1 };
enum Variant : std::int64_t { kMissDonate = 0, kHitDonate = 1, kHitRelease = 2 };

// Built on first use and shared by the runs of one shape (later runs see the few segments earlier
// runs added, which does not change the scale).
PopulatedCache& populated(Shape shape) {
  static std::map<Shape, std::unique_ptr<PopulatedCache>> built;
  auto& slot = built[shape];
  if (!slot) {
    slot = std::make_unique<PopulatedCache>(shape == kConversationTree ? std::vector<std::int64_t>{18, 18, 18, 18}
                                                                       : std::vector<std::int64_t>{10000, 1, 1, 1});
  }
  return *slot;
}

void BM_AcquireDonate(benchmark::State& state) {
  const auto shape = static_cast<Shape>(state.range(0));
  const auto variant = static_cast<Variant>(state.range(1));
  PopulatedCache& f = populated(shape);
  const PromptTree& tree = f.tree();
  std::mt19937_64 rng(0x5eed + static_cast<std::uint64_t>(variant));
  // Fresh material never seen before: a miss starts with a first-level branch the tree lacks, a
  // hit is a stored prompt plus a new turn.
  static std::int64_t fresh = 0;

  Samples acquire, end, total;
  std::int64_t hits = 0;
  for (auto _ : state) {
    std::vector<Token> prompt;
    if (variant == kMissDonate) {
      const std::int64_t branch = tree.fanout(0) + fresh++;
      prompt = segment(0, branch);
      for (std::int32_t l = 1; l < tree.levels(); ++l) PromptTree::append(prompt, segment(l, branch));
    } else {
      prompt = tree.prompt(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(tree.size())));
      PromptTree::append(prompt, segment(tree.levels(), fresh++));
    }
    const auto t = f.run_request(prompt, variant != kHitRelease);
    acquire.add(t.acquire);
    end.add(t.end);
    total.add(t.acquire + t.end);
    hits += t.got.reused > 0 ? 1 : 0;
    state.SetIterationTime(t.acquire + t.end);
  }

  const cache::CacheStats stats = f.cache().stats();
  acquire.report(state, "acquire");
  end.report(state, variant == kHitRelease ? "release" : "donate");
  total.report(state, "total");
  state.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(state.iterations());
  state.counters["host_segments"] = static_cast<double>(stats.host.entries);
  state.counters["setup_s"] = f.setup_seconds();
  state.SetLabel(std::string(shape == kConversationTree ? "tree 18^4" : "flat 10k") + ", " +
                 (variant == kMissDonate ? "miss+donate" : variant == kHitDonate ? "hit+donate" : "hit+release"));
}

BENCHMARK(BM_AcquireDonate)
    ->ArgNames({"shape", "variant"})
    ->Args({kConversationTree, kMissDonate})
    ->Args({kConversationTree, kHitDonate})
    ->Args({kConversationTree, kHitRelease})
    ->Args({kFlat, kMissDonate})
    ->Args({kFlat, kHitDonate})
    ->UseManualTime()
    ->Iterations(5000)
    ->Unit(benchmark::kMicrosecond);

// One request (a hit with a new turn, donated), then the refresh that finds its events: the walk
// of every tier's index the scheduler pays per batch of events.
void BM_KvEventsRefresh(benchmark::State& state) {
  PopulatedCache& f = populated(kConversationTree);
  static bool recording = false;
  if (!recording) {
    f.cache().record_kv_events([](const cache::ScopeId&) { return true; });  // counts every holder once
    recording = true;
  }
  const PromptTree& tree = f.tree();
  std::mt19937_64 rng(0xe7e7);
  static std::int64_t fresh = 1 << 20;
  Samples refresh;
  std::int64_t events = 0;
  for (auto _ : state) {
    std::vector<Token> prompt = tree.prompt(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(tree.size())));
    PromptTree::append(prompt, segment(tree.levels(), fresh++));
    f.run_request(prompt, true);
    const auto r0 = Clock::now();
    events += static_cast<std::int64_t>(f.cache().take_kv_events().size());
    const auto r1 = Clock::now();
    refresh.add(seconds_between(r0, r1));
    state.SetIterationTime(seconds_between(r0, r1));
  }
  refresh.report(state, "refresh");
  state.counters["events_per_refresh"] = static_cast<double>(events) / static_cast<double>(state.iterations());
  state.counters["host_segments"] = static_cast<double>(f.cache().stats().host.entries);
  state.SetLabel("tree 18^4, hit+donate, then the refresh");
}

BENCHMARK(BM_KvEventsRefresh)->UseManualTime()->Iterations(200)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace prefixd::micro

BENCHMARK_MAIN();
