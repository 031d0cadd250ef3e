// The prompt cache over the real libllama engine and the generated tiny model: warm requests
// must see the logits a cold request sees (invariant 3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "engine/engine.h"

namespace prefixd::cache {
namespace {

using engine::Token;

constexpr engine::SeqId kSlot = 0, kOtherSlot = 1, kScratch = 6;

// Flash attention off by default here: its CPU kernel rounds K, V and Q to f16, so a warm and a
// cold run differ by that rounding (WarmDeviceHitMatchesColdLogitsWithFlashAttention), which would
// hide the cache's own exactness these tests measure.
std::unique_ptr<engine::Engine> tiny_engine(bool flash_attention = false) {
  engine::ContextOptions o;
  o.n_ctx = 1024;
  o.n_batch = 64;
  o.n_parallel = 2;
  o.n_holder_seqs = 5;
  o.n_threads = 1;  // one: ctest runs another test beside this one (tests/integration/server_process.cpp says why)
  o.flash_attention = flash_attention;
  return engine::load_llama_engine(PREFIXD_TINY_MODEL, o);
}

CacheConfig small_config() {
  CacheConfig c;
  c.min_prefix = 8;
  c.block_size = 16;
  c.host_segment_tokens = 64;
  c.host_capacity_bytes = 64 << 20;
  c.device_cells = 1024;
  return c;
}

std::vector<Token> long_prompt(const engine::Engine& e) {
  std::string text = "<|im_start|>system\nYou are a careful assistant who answers briefly.<|im_end|>\n<|im_start|>user\n";
  for (int i = 0; i < 12; ++i) text += "Paragraph " + std::to_string(i) + " talks about rivers, mountains and old maps. ";
  text += "<|im_end|>\n<|im_start|>assistant\n";
  return e.vocab().tokenize(text, false, true);
}

// Feeds tokens [from, to) in chunks that end at multiples of `chunk`; returns the last logits.
std::vector<float> feed(engine::Engine& e, engine::SeqId seq, const std::vector<Token>& tokens, int from, int to,
                        int chunk = 64) {
  std::vector<float> last;
  int i = from;
  while (i < to) {
    const int end = std::min(to, (i / chunk + 1) * chunk);
    std::vector<engine::BatchToken> batch;
    for (int j = i; j < end; ++j) batch.push_back({tokens[static_cast<size_t>(j)], j, seq, j == to - 1});
    EXPECT_EQ(e.decode(batch), engine::DecodeStatus::ok);
    if (end == to) {
      auto span = e.logits(static_cast<std::int32_t>(batch.size()) - 1);
      last.assign(span.begin(), span.end());
    }
    i = end;
  }
  return last;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

size_t argmax(const std::vector<float>& v) { return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

std::vector<engine::SeqId> holders() { return {2, 3, 4, 5}; }

TEST(CacheOnTinyModel, WarmDeviceHitMatchesColdLogits) {
  auto e = tiny_engine();
  PrefixCache cache(*e, small_config(), holders(), kScratch);
  const auto prompt = long_prompt(*e);
  const int n = static_cast<int>(prompt.size());
  ASSERT_GT(n, 100);
  const RequestKey key{"ns", "s"};

  ASSERT_EQ(PrefixCacheProbe(cache).acquire(key, prompt, kSlot).reused, 0);
  const auto cold = feed(*e, kSlot, prompt, 0, n);
  cache.donate(kSlot, prompt);

  const Acquisition warm_hit = PrefixCacheProbe(cache).acquire(key, prompt, kOtherSlot);
  ASSERT_EQ(warm_hit.outcome, Outcome::hit_extend);
  ASSERT_EQ(warm_hit.reused, n - 1);
  const auto warm = feed(*e, kOtherSlot, prompt, n - 1, n);
  const float diff = max_abs_diff(cold, warm);
  RecordProperty("warm_vs_cold_max_abs_diff", std::to_string(diff));
  std::printf("warm (device) vs cold first-token logits: max abs diff %.3g\n", diff);
  EXPECT_LT(diff, 5e-3f);
  EXPECT_EQ(argmax(cold), argmax(warm)) << "greedy first token identical";
}

// The server's default: the same reuse, within the f16 rounding of the flash-attention kernel.
TEST(CacheOnTinyModel, WarmDeviceHitMatchesColdLogitsWithFlashAttention) {
  auto e = tiny_engine(/*flash_attention=*/true);
  PrefixCache cache(*e, small_config(), holders(), kScratch);
  const auto prompt = long_prompt(*e);
  const int n = static_cast<int>(prompt.size());
  const RequestKey key{"ns", "s"};
  ASSERT_EQ(PrefixCacheProbe(cache).acquire(key, prompt, kSlot).reused, 0);
  const auto cold = feed(*e, kSlot, prompt, 0, n);
  cache.donate(kSlot, prompt);
  ASSERT_EQ(PrefixCacheProbe(cache).acquire(key, prompt, kOtherSlot).reused, n - 1);
  const auto warm = feed(*e, kOtherSlot, prompt, n - 1, n);
  const float diff = max_abs_diff(cold, warm);
  std::printf("flash attention: warm (device) vs cold first-token logits: max abs diff %.3g\n", diff);
  EXPECT_LT(diff, 5e-2f);
  EXPECT_EQ(argmax(cold), argmax(warm)) << "greedy first token identical";
}

TEST(CacheOnTinyModel, CompactedEntryGivesTheSameLogitsAsBefore) {
  auto e = tiny_engine();
  CacheConfig config = small_config();
  config.compaction = Compaction::idle;
  PrefixCache cache(*e, config, holders(), kScratch);
  const auto prompt = long_prompt(*e);
  const int n = static_cast<int>(prompt.size());
  const RequestKey key{"ns", "s"};
  // Occupy the low cells first so the entry sits high in the context, then free them.
  const auto filler = long_prompt(*e);
  feed(*e, kOtherSlot, filler, 0, static_cast<int>(filler.size()));
  ASSERT_EQ(PrefixCacheProbe(cache).acquire(key, prompt, kSlot).reused, 0);
  const auto cold = feed(*e, kSlot, prompt, 0, n);
  e->remove_sequence(kOtherSlot, 0, -1);
  cache.donate(kSlot, prompt);
  ASSERT_GT(cache.tick(/*nothing_running=*/true), 0);

  ASSERT_EQ(PrefixCacheProbe(cache).acquire(key, prompt, kSlot).reused, n - 1);
  const auto warm = feed(*e, kSlot, prompt, n - 1, n);
  const float diff = max_abs_diff(cold, warm);
  std::printf("compacted (device) vs cold first-token logits: max abs diff %.3g\n", diff);
  EXPECT_LT(diff, 5e-3f);
  EXPECT_EQ(argmax(cold), argmax(warm));
}

TEST(CacheOnTinyModel, PrefixRestoredIntoAnEmptyContextAtTheChunkBoundaryIsBitIdentical) {
  const RequestKey key{"ns", "s"};
  std::vector<float> cold;
  std::vector<Token> prompt;
  {
    auto e = tiny_engine();
    prompt = long_prompt(*e);
    cold = feed(*e, kSlot, prompt, 0, static_cast<int>(prompt.size()));
  }
  auto e = tiny_engine();
  PrefixCache cache(*e, small_config(), holders(), kScratch);
  const int n = static_cast<int>(prompt.size());
  // Build the host tier: compute a prefix that ends on the cold run's 64-token chunk boundary,
  // donate it, demote it, leaving the context empty.
  const int m = (n - 1) / 64 * 64;
  ASSERT_GT(m, 0);
  const auto prefix = std::span<const Token>(prompt).first(static_cast<size_t>(m));
  ASSERT_EQ(PrefixCacheProbe(cache).acquire(key, prefix, kSlot).reused, 0);
  feed(*e, kSlot, prompt, 0, m);
  cache.donate(kSlot, prefix);
  ASSERT_GT(cache.release_device_cells(m), 0);
  ASSERT_EQ(cache.stats().device.entries, 0);
  for (engine::SeqId s = 0; s < 7; ++s) ASSERT_TRUE(e->sequence_positions(s).empty());

  const Acquisition restored = PrefixCacheProbe(cache).acquire(key, prompt, kSlot);
  ASSERT_EQ(restored.outcome, Outcome::hit_restore);
  ASSERT_EQ(restored.reused, m) << "the whole stored prefix comes back";
  const auto warm = feed(*e, kSlot, prompt, restored.reused, n);
  const float diff = max_abs_diff(cold, warm);
  std::printf("restored (host, %d tokens) vs cold first-token logits: max abs diff %.3g\n", restored.reused, diff);
  EXPECT_EQ(diff, 0.0f);
}

TEST(CacheOnTinyModel, ConcurrentSlotsSharingOnePrefixStayCorrect) {
  auto e = tiny_engine();
  PrefixCache cache(*e, small_config(), holders(), kScratch);
  const RequestKey key{"ns", "s"};
  const auto prompt = long_prompt(*e);
  const int n = static_cast<int>(prompt.size());
  ASSERT_EQ(PrefixCacheProbe(cache).acquire(key, prompt, kSlot).reused, 0);
  feed(*e, kSlot, prompt, 0, n);
  cache.donate(kSlot, prompt);
  // Two requests adopt the same cells and then diverge; each must match its own cold run.
  auto a = prompt;
  auto b = prompt;
  a.push_back(e->vocab().tokenize(" rivers", false, false)[0]);
  b.push_back(e->vocab().tokenize(" maps", false, false)[0]);
  ASSERT_EQ(PrefixCacheProbe(cache).acquire(key, a, kSlot).reused, n);
  ASSERT_EQ(PrefixCacheProbe(cache).acquire(key, b, kOtherSlot).reused, n);
  const auto warm_a = feed(*e, kSlot, a, n, n + 1);
  const auto warm_b = feed(*e, kOtherSlot, b, n, n + 1);
  auto fresh = tiny_engine();
  const auto cold_a = feed(*fresh, kSlot, a, 0, n + 1);
  const auto cold_b = feed(*fresh, kOtherSlot, b, 0, n + 1);
  EXPECT_LT(max_abs_diff(warm_a, cold_a), 5e-3f);
  EXPECT_LT(max_abs_diff(warm_b, cold_b), 5e-3f);
  EXPECT_EQ(argmax(warm_a), argmax(cold_a));
  EXPECT_EQ(argmax(warm_b), argmax(cold_b));
}

}  // namespace
}  // namespace prefixd::cache
