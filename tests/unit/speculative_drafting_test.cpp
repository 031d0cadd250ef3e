// N-gram drafting: where a context's ending was seen before, the pool of earlier replies (its
// groups, owners and bound), and the pacing that keeps wrong guesses cheap.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "speculative/ngram_drafter.h"
#include "speculative/output_pool.h"
#include "speculative/suffix_match.h"

namespace prefixd::speculative {
namespace {

using Tokens = std::vector<engine::Token>;

TEST(SuffixMatch, FindsTheLongestAndThenTheLatestMatch) {
  const Tokens source = {1, 2, 3, 9, 7, 2, 3, 8, 5, 1, 2, 3, 4};
  // Context ends with 1 2 3: matches end at index 2 (length 3), 6 (length 2: 7 differs from 1) and
  // 11 (length 3, the latest: it wins, and token 4 follows it).
  const SuffixMatch m = longest_suffix_match(source, Tokens{6, 1, 2, 3}, 8);
  EXPECT_EQ(m.length, 3);
  EXPECT_EQ(m.next, 12u);
  // Capped at max_length, the latest of the equally long wins.
  const SuffixMatch capped = longest_suffix_match(source, Tokens{6, 1, 2, 3}, 1);
  EXPECT_EQ(capped.length, 1);
  EXPECT_EQ(capped.next, 12u);
  // A match with no token after it is no match.
  EXPECT_EQ(longest_suffix_match(Tokens{5, 6}, Tokens{5, 6}, 8).length, 0);
  EXPECT_EQ(longest_suffix_match(Tokens{}, Tokens{1}, 8).length, 0);
  EXPECT_EQ(longest_suffix_match(source, Tokens{}, 8).length, 0);
}

TEST(NgramDraft, DraftsFromTheContextsOwnRepetition) {
  // "a b c d e" then "a b c": the draft is "d e a b c" cut at `most`.
  const Tokens context = {10, 11, 12, 13, 14, 10, 11, 12};
  const Draft d = draft_ngram(context, nullptr, "", 2, 1);
  EXPECT_EQ(d.source, DraftSource::context);
  EXPECT_EQ(d.tokens, (Tokens{13, 14}));
  // Shorter than `fewest`: nothing. A match shorter than kShortestMatch: nothing.
  EXPECT_TRUE(draft_ngram(Tokens{10, 11, 12, 13, 10, 11, 12}, nullptr, "", 8, 5).tokens.empty());
  EXPECT_TRUE(draft_ngram(Tokens{10, 11, 12, 13, 99, 11, 12}, nullptr, "", 8, 1).tokens.empty());
}

TEST(NgramDraft, ARegeneratedReplyDraftsTheEarlierOneFromThePool) {
  OutputPool pool(1000);
  const Tokens prompt = {1, 2, 3, 4, 5, 6};
  const Tokens reply = {40, 41, 42, 43, 44};
  pool.remember("ns", "tenant", prompt, reply);
  // The same prompt and the first token of the reply drawn: the rest of the earlier reply follows.
  Tokens context = prompt;
  context.push_back(40);
  const Draft d = draft_ngram(context, &pool, "ns", 16, 2);
  EXPECT_EQ(d.source, DraftSource::pool);
  EXPECT_EQ(d.tokens, (Tokens{41, 42, 43, 44}));
  // Another namespace never sees it.
  EXPECT_TRUE(draft_ngram(context, &pool, "other", 16, 2).tokens.empty());
}

TEST(OutputPool, KeepsItsBoundDropsTheOldestAndForgetsAnOwner) {
  OutputPool pool(3 * (OutputPool::kLeadTokens + 10));
  const Tokens prompt(OutputPool::kLeadTokens + 20, 7);  // only kLeadTokens of it are kept
  for (int i = 0; i < 4; ++i) {
    Tokens reply(10, 100 + i);
    pool.remember("ns", i % 2 == 0 ? "even" : "odd", prompt, reply);
  }
  EXPECT_EQ(pool.entries(), 3u);  // the first went
  EXPECT_EQ(pool.tokens(), 3 * (OutputPool::kLeadTokens + 10));
  // The same reply again refreshes its entry instead of adding one.
  pool.remember("ns", "odd", prompt, Tokens(10, 103));
  EXPECT_EQ(pool.entries(), 3u);
  pool.forget_owner("odd");
  EXPECT_EQ(pool.entries(), 1u);
  EXPECT_EQ(pool.tokens(), OutputPool::kLeadTokens + 10);
  // Too short to draft from, or larger than the whole pool: not kept.
  pool.remember("ns", "even", prompt, Tokens{1});
  pool.remember("ns", "even", prompt, Tokens(pool.max_tokens(), 3));
  EXPECT_EQ(pool.entries(), 1u);
  pool.clear();
  EXPECT_EQ(pool.entries(), 0u);
  EXPECT_EQ(pool.tokens(), 0u);
}

TEST(DraftPacing, BacksOffWhileDraftsMissAndGrowsWhileTheyHit) {
  DraftPacing pacing(16, 2);
  EXPECT_EQ(pacing.next_length(), 16);
  pacing.observe(16, 5);  // a partial hit: what was accepted plus one
  EXPECT_EQ(pacing.next_length(), 6);
  pacing.observe(6, 6);  // a full hit doubles
  EXPECT_EQ(pacing.next_length(), 12);
  // Misses in a row: the fewest, after pauses of 1, 2, 4 ... steps, at most kLongestPause.
  int expected_pause = 1;
  for (int miss = 0; miss < 9; ++miss) {
    pacing.observe(2, 0);
    int paused = 0;
    while (pacing.next_length() == 0) ++paused;
    EXPECT_EQ(paused, expected_pause) << "after miss " << miss + 1;
    expected_pause = std::min(expected_pause * 2, DraftPacing::kLongestPause);
  }
  pacing.observe(2, 1);  // any hit ends the pauses
  EXPECT_EQ(pacing.next_length(), 2);
  pacing.observe(0, 0);  // no verification: nothing changes
  EXPECT_EQ(pacing.next_length(), 2);
}

}  // namespace
}  // namespace prefixd::speculative
