// N-gram drafting: where a context's ending was seen before, the pool of earlier replies (its
// groups, owners and bound), and the measured economics that keep wrong guesses cheap.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "speculative/draft_economics.h"
#include "speculative/ngram_drafter.h"
#include "speculative/output_pool.h"
#include "speculative/suffix_match.h"
#include "speculative/vocabulary_match.h"

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

// An image's positions hold negative stand-in ids, which the model is never fed as tokens: a
// guess that would run into them stops before them.
TEST(NgramDraft, AGuessStopsBeforeAnImagesStandIns) {
  const Tokens context = {10, 11, 12, 13, -7, -8, -9, 14, 10, 11, 12};
  const Draft d = draft_ngram(context, nullptr, "", 8, 1);
  EXPECT_EQ(d.tokens, (Tokens{13}));
  EXPECT_TRUE(draft_ngram(context, nullptr, "", 8, 2).tokens.empty());
  OutputPool pool(1000);
  pool.remember("ns", "tenant", Tokens{1, 2, 3, -5, -6}, Tokens{40, 41});
  EXPECT_TRUE(draft_ngram(Tokens{9, 1, 2, 3}, &pool, "ns", 8, 1).tokens.empty());
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

// The index finds what reading every entry of the group finds: the longest match (of at least
// kIndexedTokens), the newest entry and then the latest place winning ties. Random small-alphabet
// replies, so that runs recur across entries and groups, with evictions along the way.
TEST(OutputPool, TheIndexFindsWhatReadingEveryEntryFinds) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<engine::Token> token(0, 5);
  OutputPool pool(3000);
  struct Kept {
    std::string group;
    Tokens tokens;
  };
  std::vector<Kept> kept;  // what the pool should hold, oldest first
  for (int round = 0; round < 300; ++round) {
    const std::string group = round % 3 == 0 ? "b" : "a";
    Tokens prompt(static_cast<size_t>(std::uniform_int_distribution<int>(0, 80)(rng)));
    Tokens reply(static_cast<size_t>(std::uniform_int_distribution<int>(2, 60)(rng)));
    for (auto& t : prompt) t = token(rng);
    for (auto& t : reply) t = token(rng);
    pool.remember(group, "owner", prompt, reply);
    Tokens stored(prompt.end() - static_cast<std::ptrdiff_t>(std::min(prompt.size(), OutputPool::kLeadTokens)), prompt.end());
    stored.insert(stored.end(), reply.begin(), reply.end());
    std::erase_if(kept, [&](const Kept& k) { return k.group == group && k.tokens == stored; });
    kept.push_back({group, stored});
    std::size_t total = 0;
    for (const Kept& k : kept) total += k.tokens.size();
    while (total > pool.max_tokens()) {
      total -= kept.front().tokens.size();
      kept.erase(kept.begin());
    }
    ASSERT_EQ(pool.entries(), kept.size());
    ASSERT_EQ(pool.tokens(), total);
    Tokens context(12);
    for (auto& t : context) t = token(rng);
    for (const char* g : {"a", "b"}) {
      SuffixMatch expected;
      Tokens expected_next;
      for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
        if (it->group != g) continue;
        const SuffixMatch m = longest_suffix_match(it->tokens, context, 8);
        if (m.length >= OutputPool::kIndexedTokens && m.length > expected.length) {
          expected = m;
          expected_next.assign(it->tokens.begin() + static_cast<std::ptrdiff_t>(m.next), it->tokens.end());
        }
      }
      const OutputPool::Found found = pool.find(g, context, 8);
      ASSERT_EQ(found.match.length, expected.length) << "round " << round << " group " << g;
      ASSERT_EQ(Tokens(found.continuation.begin(), found.continuation.end()), expected_next) << "round " << round;
    }
  }
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

TEST(DraftEconomics, ADraftIsAsLongAsItPaysOnTheMeasuredCosts) {
  RowCosts cpu;
  EXPECT_FALSE(cpu.call_seconds(1));
  // Without measurements the shortest draft goes: its call measures the costs at the least cost.
  EXPECT_EQ(best_draft_length(cpu, 0.1, 0, 2, 16), 2);
  // This machine's CPU: 21 ms for one row, 14 ms per further row.
  cpu.observe(1, 0.021);
  cpu.observe(17, 0.021 + 16 * 0.014);
  ASSERT_TRUE(cpu.call_seconds(9));
  EXPECT_NEAR(*cpu.call_seconds(9), 0.021 + 8 * 0.014, 1e-9);
  // Guesses nearly always right: a long draft pays (about 12 tokens maximize the rate here).
  const std::int32_t sure = best_draft_length(cpu, 0.99, 0, 2, 32);
  EXPECT_GE(sure, 8);
  EXPECT_LE(sure, 16);
  // Right two times in three: a row costs two thirds of a lone step, so no draft pays.
  EXPECT_EQ(best_draft_length(cpu, 0.6, 0, 2, 16), 0);
  // Beside 15 other rows the same rows cost every request in the call: fewer pay.
  EXPECT_LT(best_draft_length(cpu, 0.99, 15, 2, 32), sure);
  // A GPU: one more row costs almost nothing, so even a weak guess is worth a long draft.
  RowCosts gpu;
  gpu.observe(1, 0.010);
  gpu.observe(17, 0.0102);
  EXPECT_GE(best_draft_length(gpu, 0.6, 0, 2, 16), 8);
  // Never shorter than `fewest`, and nothing when `most` is below it.
  EXPECT_EQ(best_draft_length(gpu, 0.6, 0, 20, 16), 0);
  // A draft model's guesses cost its own calls: one as slow as the target's step never pays on
  // this CPU, one a tenth as slow still does for sure guesses.
  EXPECT_EQ(best_draft_length(cpu, 0.99, 0, 1, 16, 0.021), 0);
  EXPECT_GT(best_draft_length(cpu, 0.99, 0, 1, 16, 0.002), 0);
  EXPECT_LT(best_draft_length(cpu, 0.99, 0, 1, 32, 0.002), sure);
}

// A vocabulary of the given pieces; ids listed in `ends` end generation.
class ListedVocabulary final : public engine::Vocabulary {
 public:
  ListedVocabulary(std::vector<std::string> pieces, std::vector<engine::Token> ends)
      : pieces_(std::move(pieces)), ends_(std::move(ends)) {}
  std::vector<engine::Token> tokenize(std::string_view, bool, bool) const override { return {}; }
  std::vector<engine::Token> tokenize_with_literals(std::string_view, bool, std::span<const engine::TextRange>) const override {
    return {};
  }
  const std::vector<std::string>& control_texts() const override { return none_; }
  std::optional<engine::TokenSpan> token_span() const override { return std::nullopt; }
  std::string piece(engine::Token token, bool) const override { return pieces_.at(static_cast<size_t>(token)); }
  bool is_end_of_generation(engine::Token token) const override { return std::ranges::count(ends_, token) > 0; }
  std::int32_t size() const override { return static_cast<std::int32_t>(pieces_.size()); }

 private:
  std::vector<std::string> pieces_;
  std::vector<engine::Token> ends_;
  std::vector<std::string> none_;
};

TEST(DraftVocabulary, AMismatchNamesTheFirstDifferentTokenAndPaddingIsAllowed) {
  std::vector<std::string> pieces;
  for (int i = 0; i < 300; ++i) pieces.push_back("t" + std::to_string(i));
  const ListedVocabulary target(pieces, {299});
  EXPECT_EQ(vocabulary_difference(target, ListedVocabulary(pieces, {299})), std::nullopt);
  // A drafter with 100 padding rows fewer reads the ids both have.
  std::vector<std::string> shorter(pieces.begin(), pieces.end() - 100);
  EXPECT_EQ(vocabulary_difference(target, ListedVocabulary(shorter, {})), std::nullopt);
  std::vector<std::string> tiny(pieces.begin(), pieces.begin() + 10);
  EXPECT_NE(vocabulary_difference(target, ListedVocabulary(tiny, {}))->find("300 tokens and the drafter 10"), std::string::npos);
  std::vector<std::string> renamed = pieces;
  renamed[42] = "t42\n";
  const auto named = vocabulary_difference(target, ListedVocabulary(renamed, {299}));
  ASSERT_TRUE(named);
  EXPECT_NE(named->find("token 42 is \"t42\" in the target and \"t42\\x0a\" in the drafter"), std::string::npos) << *named;
  const auto ends = vocabulary_difference(target, ListedVocabulary(pieces, {7, 299}));
  ASSERT_TRUE(ends);
  EXPECT_NE(ends->find("token 7 (\"t7\") ends generation in the drafter only"), std::string::npos) << *ends;
}

TEST(DraftEconomics, ARequestsRecordAndTheMatchLengthEstimateItsAcceptance) {
  DraftRecord record;
  // No drafts yet: the prior alone, higher for a longer match.
  EXPECT_NEAR(record.acceptance(3), 0.6, 1e-9);
  EXPECT_GT(record.acceptance(30), record.acceptance(3));
  // Misses pull it down, accepted tokens up.
  record.observe(4, 0);
  record.observe(4, 0);
  EXPECT_LT(record.acceptance(3), 0.5);
  record.observe(16, 16);
  record.observe(16, 16);
  EXPECT_GT(record.acceptance(3), 0.8);
  EXPECT_EQ(record.drafted(), 40);
  EXPECT_EQ(record.accepted(), 32);
  record.observe(0, 0);  // no verification
  EXPECT_EQ(record.drafted(), 40);
}

}  // namespace
}  // namespace prefixd::speculative
