// Reuse by shifting: the chunks llama-server's scan finds past the exact prefix.
#include <gtest/gtest.h>

#include <vector>

#include "cache/shifted_reuse.h"

namespace prefixd::cache {
namespace {

using engine::Token;

std::vector<Token> run(Token first, int n) {
  std::vector<Token> out;
  for (int i = 0; i < n; ++i) out.push_back(first + i);
  return out;
}

std::vector<Token> cat(std::initializer_list<std::vector<Token>> parts) {
  std::vector<Token> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(ShiftedReuse, AChunkRemovedFromTheMiddleMovesWhatFollowsIt) {
  const auto x = run(100, 10), y = run(200, 7), z = run(300, 12), w = run(400, 5);
  const auto cached = cat({x, y, z});
  const auto prompt = cat({x, z, w});
  const auto chunks = find_shift_chunks(cached, prompt, 10, 4, static_cast<std::int32_t>(prompt.size()) - 1);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].from, 17);
  EXPECT_EQ(chunks[0].to, 10);
  EXPECT_EQ(chunks[0].length, 12);
  EXPECT_EQ(shifted_tokens(chunks), 12);
}

TEST(ShiftedReuse, ARotatedRingKeepsItsChunksInOrderAndShortRunsAreSkipped) {
  const auto a = run(100, 8), b = run(200, 8), c = run(300, 8), d = run(400, 8), e = run(500, 8);
  const auto cached = cat({a, b, c, d});
  // b and c came back, one token of d (too short a run), then new text.
  const auto prompt = cat({b, c, {400}, e});
  const auto chunks = find_shift_chunks(cached, prompt, 0, 4, static_cast<std::int32_t>(prompt.size()) - 1);
  ASSERT_EQ(chunks.size(), 1u) << "b and c are one run of 16 in both";
  EXPECT_EQ(chunks[0].from, 8);
  EXPECT_EQ(chunks[0].to, 0);
  EXPECT_EQ(chunks[0].length, 17) << "d's first token follows c in both";

  // Chunks that are apart in the cached sequence come together in the prompt.
  const auto apart = cat({b, d, e});
  const auto two = find_shift_chunks(cached, apart, 0, 4, static_cast<std::int32_t>(apart.size()));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].from, 8);
  EXPECT_EQ(two[0].to, 0);
  EXPECT_EQ(two[1].from, 24);
  EXPECT_EQ(two[1].to, 8);
  EXPECT_EQ(shifted_tokens(two), 16);
}

TEST(ShiftedReuse, TheLimitTheMinimumAndTheStartAreKept) {
  const auto a = run(100, 8), b = run(200, 8);
  const auto cached = cat({a, b});
  const auto prompt = b;
  // The last prompt token is never taken (limit = size - 1): a run of 7.
  const auto guarded = find_shift_chunks(cached, prompt, 0, 4, 7);
  ASSERT_EQ(guarded.size(), 1u);
  EXPECT_EQ(guarded[0].length, 7);
  EXPECT_TRUE(find_shift_chunks(cached, prompt, 0, 8, 7).empty()) << "a run shorter than the minimum";
  EXPECT_TRUE(find_shift_chunks(cached, prompt, 0, 0, 7).empty()) << "off";
  // From the start given: the prompt's first 8 tokens are its exact prefix already.
  const auto after = find_shift_chunks(cat({a, b, a}), cat({a, a}), 8, 4, 15);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].from, 16);
  EXPECT_EQ(after[0].to, 8);
  EXPECT_EQ(after[0].length, 7);
}

}  // namespace
}  // namespace prefixd::cache
