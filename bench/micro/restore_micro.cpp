// Host-tier restore bandwidth on a real model, against memcpy of the same bytes.
//
// A prompt of N tokens is computed, donated and demoted (release_device_cells), leaving its K/V
// only in the host tier; each iteration then acquires a prompt that extends it by one token, which
// restores all N positions from the host (Outcome::hit_restore), and releases it again. Bandwidth
// is the host tier's bytes for those segments over the acquire's time. The same bytes are copied
// with memcpy in the same run, so the fraction does not depend on the machine.
//
// To show where the time goes the engine's own operations are timed too: restore_sequence of the
// whole prompt as one blob (no cache around it) and the metadata-only copy_sequence that moves
// restored cells from the scratch sequence to the request's.
//
// Needs a model: PREFIXD_MICRO_MODEL names a GGUF file (`make microbench` generates the tiny one).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "engine/engine.h"
#include "micro_util.h"

namespace prefixd::micro {
namespace {

using engine::SeqId;
using engine::Token;

constexpr SeqId kSlot = 0, kOtherSlot = 1, kScratch = 6;
const cache::RequestKey kKey{"micro-namespace", ""};

// One context for every run: loading is slow and each run leaves the context empty.
engine::Engine* model_engine() {
  static std::unique_ptr<engine::Engine> loaded = [] {
    const char* path = std::getenv("PREFIXD_MICRO_MODEL");
    if (path == nullptr || *path == '\0') return std::unique_ptr<engine::Engine>{};
    engine::ContextOptions o;
    o.n_ctx = 4096;
    o.n_batch = 512;
    o.n_parallel = 2;
    o.n_holder_seqs = 5;  // holders 2..5 and the scratch sequence 6
    return engine::load_llama_engine(path, o);
  }();
  return loaded.get();
}

std::vector<Token> synthetic_prompt(const engine::Engine& e, std::int32_t n) {
  std::vector<Token> out(static_cast<std::size_t>(n));
  const std::int64_t vocab = e.vocab().size();
  for (std::int32_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = static_cast<Token>((i * 7919LL + 13) % vocab);
  return out;
}

double median_seconds(const Samples& s) { return s.quantile(0.5); }

void BM_HostRestore(benchmark::State& state) {
  engine::Engine* e = model_engine();
  if (e == nullptr) {
    state.SkipWithError("set PREFIXD_MICRO_MODEL to a GGUF model (make microbench does)");
    return;
  }
  const auto n = static_cast<std::int32_t>(state.range(0));
  e->clear();
  cache::CacheConfig config;
  config.min_prefix = 32;
  config.device_cells = 0;
  config.compaction = cache::Compaction::never;
  config.host_capacity_bytes = 4ull << 30;
  cache::PrefixCache cache(*e, config, {2, 3, 4, 5}, kScratch);

  // Store the prompt's K/V in the host tier only.
  std::vector<Token> prompt = synthetic_prompt(*e, n + 1);
  const auto stored = std::span<const Token>(prompt).first(static_cast<std::size_t>(n));
  if (cache::PrefixCacheProbe(cache).acquire(kKey, stored, kSlot).reused != 0) throw std::logic_error("a fresh cache has nothing to reuse");
  compute(*e, kSlot, stored, 0);
  cache.advance(kSlot, n);
  const engine::Bytes whole = e->save_sequence(kSlot);  // the same K/V as one blob, for the engine-only timing
  cache.donate(kSlot, stored);
  cache.release_device_cells(n);
  const cache::CacheStats before = cache.stats();
  if (before.device.entries != 0 || before.host.bytes == 0) throw std::logic_error("the prompt did not reach the host tier");
  const std::uint64_t bytes = before.host.bytes;

  Samples restore;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const cache::Acquisition got = cache::PrefixCacheProbe(cache).acquire(kKey, prompt, kSlot);
    const auto t1 = Clock::now();
    if (got.outcome != cache::Outcome::hit_restore || got.reused != n) {
      state.SkipWithError("the acquire did not restore the whole prompt from the host tier");
      break;
    }
    cache.release(kSlot);
    restore.add(seconds_between(t0, t1));
    state.SetIterationTime(seconds_between(t0, t1));
  }
  if (restore.empty()) return;

  // The engine alone: one restore_sequence of the whole prompt, and the cell-sharing copy that
  // the host tier does after each segment's restore.
  Samples engine_restore, engine_copy;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    if (!e->restore_sequence(whole, kOtherSlot)) throw std::runtime_error("restore_sequence failed");
    const auto t1 = Clock::now();
    e->copy_sequence(kOtherSlot, kSlot, 0, n);
    const auto t2 = Clock::now();
    e->remove_sequence(kSlot, 0, -1);
    e->remove_sequence(kOtherSlot, 0, -1);
    engine_restore.add(seconds_between(t0, t1));
    engine_copy.add(seconds_between(t1, t2));
  }

  // memcpy of the host tier's bytes, source and destination distinct and touched beforehand.
  std::vector<std::uint8_t> src(bytes, 0x5a), dst(bytes, 0);
  Samples copy;
  for (int i = 0; i < 50; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
    copy.add(seconds_between(t0, Clock::now()));
  }

  const double restore_gbps = static_cast<double>(bytes) / median_seconds(restore) / 1e9;
  const double memcpy_gbps = static_cast<double>(bytes) / median_seconds(copy) / 1e9;
  state.counters["tokens"] = n;
  state.counters["host_bytes"] = static_cast<double>(bytes);
  state.counters["host_segments"] = static_cast<double>(before.host.entries);
  state.counters["restore_GBps"] = restore_gbps;
  state.counters["memcpy_GBps"] = memcpy_gbps;
  state.counters["fraction_of_memcpy"] = restore_gbps / memcpy_gbps;
  state.counters["engine_restore_GBps"] = static_cast<double>(whole.size()) / median_seconds(engine_restore) / 1e9;
  state.counters["engine_copy_us"] = median_seconds(engine_copy) * 1e6;
  restore.report(state, "acquire");
  e->clear();
}

BENCHMARK(BM_HostRestore)->ArgName("tokens")->Arg(512)->Arg(2048)->UseManualTime()->Iterations(30)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace prefixd::micro
