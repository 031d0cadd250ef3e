// The FakeEngine imitating each model family's memory: decode position rules, copy and removal
// semantics, whole-state and checkpoint save/restore, and logits that tell a correctly rebuilt
// sequence from a wrongly rebuilt one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/fake_engine.h"

namespace prefixd::engine {
namespace {

constexpr std::int32_t kWindow = 5;

struct Variant {
  const char* name;
  ModelFamily family;
  bool swa_full;
};

constexpr Variant kVariants[] = {
    {"dense", ModelFamily::dense, true},
    {"window_full", ModelFamily::sliding_window, true},
    {"window_pruned", ModelFamily::sliding_window, false},
    {"recurrent", ModelFamily::recurrent, true},
    {"hybrid", ModelFamily::hybrid, true},
};

// Test names and failure messages show the variant's name instead of its bytes.
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

FakeEngineOptions options_for(ModelFamily family, bool swa_full = true) {
  return {.n_ctx = 256, .n_batch = 4, .n_seq = 4, .n_vocab = 258, .family = family,
          .sliding_window = family == ModelFamily::sliding_window ? kWindow : 0, .swa_full = swa_full};
}

FakeEngineOptions options_for(const Variant& v) { return options_for(v.family, v.swa_full); }

std::vector<Token> tokens(int seed, int count) {
  std::vector<Token> out;
  for (int i = 0; i < count; ++i) out.push_back((seed * 31 + i * 7) % 250);
  return out;
}

std::vector<Token> concat(std::span<const Token> a, std::span<const Token> b) {
  std::vector<Token> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

using Rows = std::vector<std::vector<float>>;  // logits after each of several positions

struct Fed {
  DecodeStatus status = DecodeStatus::ok;
  Rows logits;  // logits[i]: after position from + i
};

// Feeds source[from, to) into `seq` one batch_size() at a time, reading every row's logits; stops
// at the first decode that fails.
Fed feed(FakeEngine& e, SeqId seq, std::span<const Token> source, Pos from, Pos to) {
  Fed fed;
  for (Pos i = from; i < to; i += e.batch_size()) {
    std::vector<BatchToken> batch;
    for (Pos j = i; j < std::min(to, i + e.batch_size()); ++j) {
      batch.push_back({source[static_cast<size_t>(j)], j, seq, true});
    }
    fed.status = e.decode(batch);
    if (fed.status != DecodeStatus::ok) return fed;
    for (std::int32_t row = 0; row < static_cast<std::int32_t>(batch.size()); ++row) {
      const std::span<const float> logits = e.logits(row);
      fed.logits.emplace_back(logits.begin(), logits.end());
    }
  }
  return fed;
}

// The logits after the first or the last fed position; empty when nothing was fed, so a failed
// feed shows as a mismatch rather than a crash.
std::vector<float> first(const Rows& rows) { return rows.empty() ? std::vector<float>{} : rows.front(); }
std::vector<float> last(const Rows& rows) { return rows.empty() ? std::vector<float>{} : rows.back(); }

std::vector<float> cold(const FakeEngine& e, std::span<const Token> history) { return e.logits_for_history(history); }

// What a cold run over `history` gives after each position from k on.
Rows cold_from(const FakeEngine& e, std::span<const Token> history, Pos k) {
  Rows out;
  for (size_t n = static_cast<size_t>(k) + 1; n <= history.size(); ++n) out.push_back(cold(e, history.first(n)));
  return out;
}

// The way a cache rebuilds `dst` at position k: start empty, take the attention cells [0, k) from
// a holder that holds at least k positions, put back the checkpoint taken when a sequence stood
// at k, and feed the rest. Returns the logits after each fed position. Compare them all: a
// sliding window heals once it has moved past a wrong start, so only the first rows show it.
Rows resume(FakeEngine& e, SeqId holder, SeqId dst, Pos k, const Bytes& checkpoint, std::span<const Token> history) {
  EXPECT_TRUE(e.remove_sequence(dst));
  if (has_attention_cells(e.model())) e.copy_sequence(holder, dst, 0, k);
  if (!memory_is_trimmable(e.model())) {
    EXPECT_TRUE(e.restore_checkpoint(checkpoint, dst));
  }
  Fed fed = feed(e, dst, history, k, static_cast<Pos>(history.size()));
  EXPECT_EQ(fed.status, DecodeStatus::ok);
  return std::move(fed.logits);
}

class EveryFamily : public ::testing::TestWithParam<Variant> {};

INSTANTIATE_TEST_SUITE_P(FakeEngine, EveryFamily, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

TEST_P(EveryFamily, ColdRunGivesTheLogitsOfItsHistoryAtEveryRow) {
  FakeEngine e(options_for(GetParam()));
  const auto history = tokens(1, 23);
  const Fed fed = feed(e, 0, history, 0, 23);
  ASSERT_EQ(fed.status, DecodeStatus::ok);
  ASSERT_EQ(fed.logits.size(), 23u);
  for (size_t i = 0; i < fed.logits.size(); ++i) {
    EXPECT_EQ(fed.logits[i], cold(e, std::span(history).first(i + 1))) << "position " << i;
  }
  EXPECT_EQ(e.tokens_decoded(), 23);
  EXPECT_EQ(e.batches().size(), 6u);
}

TEST_P(EveryFamily, LogitsDependOnEveryTokenOfTheHistory) {
  const FakeEngine e(options_for(GetParam()));
  const auto history = tokens(2, 12);
  auto first_changed = history;
  first_changed.front() += 1;
  auto last_changed = history;
  last_changed.back() += 1;
  EXPECT_NE(cold(e, history), cold(e, first_changed)) << "long before any window";
  EXPECT_NE(cold(e, history), cold(e, last_changed));
  EXPECT_NE(cold(e, history), cold(e, std::span(history).first(11)));
}

TEST_P(EveryFamily, ModelInfoDescribesTheFamily) {
  const Variant v = GetParam();
  const FakeEngine e(options_for(v));
  const ModelInfo& info = e.model();
  EXPECT_EQ(info.family, v.family);
  const bool trimmable = v.family == ModelFamily::dense || (v.family == ModelFamily::sliding_window && v.swa_full);
  EXPECT_EQ(memory_is_trimmable(info), trimmable);
  EXPECT_EQ(has_attention_cells(info), v.family != ModelFamily::recurrent);
  EXPECT_EQ(info.kv_bytes_per_token == 0, v.family == ModelFamily::recurrent);
  if (v.family == ModelFamily::sliding_window) {
    EXPECT_EQ(info.sliding_window, kWindow);
    EXPECT_EQ(info.n_swa_layers, 1);
    EXPECT_EQ(info.swa_full, v.swa_full);
  } else {
    EXPECT_EQ(info.sliding_window, 0);
    EXPECT_FALSE(info.swa_full);
  }
}

TEST_P(EveryFamily, SavedSequenceRestoresUnderAnotherIdAndContinuesExactly) {
  FakeEngine e(options_for(GetParam()));
  const auto history = tokens(3, 26);
  ASSERT_EQ(feed(e, 0, history, 0, 18).status, DecodeStatus::ok);
  const Bytes state = e.save_sequence(0);
  ASSERT_FALSE(state.empty());
  ASSERT_TRUE(e.restore_sequence(state, 2));
  EXPECT_EQ(e.sequence_positions(2).max, e.sequence_positions(0).max);
  const Fed fed = feed(e, 2, history, 18, 26);
  ASSERT_EQ(fed.status, DecodeStatus::ok);
  EXPECT_EQ(last(fed.logits), cold(e, history));
}

TEST_P(EveryFamily, MalformedSequenceStateIsRefusedAndLeavesTheTargetEmpty) {
  FakeEngine e(options_for(GetParam()));
  const auto history = tokens(4, 10);
  ASSERT_EQ(feed(e, 0, history, 0, 10).status, DecodeStatus::ok);
  const Bytes state = e.save_sequence(0);
  Bytes truncated(state.begin(), state.end() - 1);
  Bytes trailing = state;
  trailing.push_back(0);
  Bytes bad_magic = state;
  bad_magic[0] ^= 0xff;
  const Bytes checkpoint_of_it = e.save_checkpoint(0);
  for (const Bytes& bad : {truncated, trailing, bad_magic, Bytes{}, checkpoint_of_it}) {
    ASSERT_EQ(feed(e, 1, history, 0, 10).status, DecodeStatus::ok);
    EXPECT_FALSE(e.restore_sequence(bad, 1));
    EXPECT_TRUE(e.sequence_positions(1).empty());
    EXPECT_TRUE(e.sequence_tokens(1).empty());
    EXPECT_EQ(e.recurrent_position(1), 0);
  }
}

TEST_P(EveryFamily, StateOfAnotherMemoryShapeIsRefused) {
  const Variant mine = GetParam();
  FakeEngine e(options_for(mine));
  const auto history = tokens(5, 9);
  for (const Variant& other : kVariants) {
    if (other.family == mine.family && other.swa_full == mine.swa_full) continue;
    FakeEngine source(options_for(other));
    ASSERT_EQ(feed(source, 0, history, 0, 9).status, DecodeStatus::ok);
    EXPECT_FALSE(e.restore_sequence(source.save_sequence(0), 1)) << other.name;
    const Bytes checkpoint = source.save_checkpoint(0);
    if (!checkpoint.empty()) {
      EXPECT_FALSE(e.restore_checkpoint(checkpoint, 1)) << other.name;
    }
  }
}

TEST_P(EveryFamily, CheckpointsExistExactlyWhereMemoryCannotBeTrimmed) {
  FakeEngine e(options_for(GetParam()));
  ASSERT_EQ(feed(e, 0, tokens(6, 7), 0, 7).status, DecodeStatus::ok);
  const Bytes checkpoint = e.save_checkpoint(0);
  EXPECT_EQ(checkpoint.empty(), memory_is_trimmable(e.model()));
  if (memory_is_trimmable(e.model())) {
    EXPECT_FALSE(e.restore_checkpoint(checkpoint, 1));
  }
}

TEST_P(EveryFamily, RebuiltSequenceGivesTheColdLogits) {
  FakeEngine e(options_for(GetParam()));
  const auto shared = tokens(7, 30);
  constexpr Pos k = 13;
  ASSERT_EQ(feed(e, 0, shared, 0, k).status, DecodeStatus::ok);
  const Bytes checkpoint = e.save_checkpoint(0);
  ASSERT_EQ(feed(e, 0, shared, k, 30).status, DecodeStatus::ok);  // the holder moves on past k
  const auto history = concat(std::span(shared).first(k), tokens(8, 9));
  EXPECT_EQ(resume(e, 0, 1, k, checkpoint, history), cold_from(e, history, k));
  EXPECT_EQ(e.sequence_tokens(0).size(), has_attention_cells(e.model()) ? 30u : 0u) << "the holder is untouched";
}

// The families whose reuse depends on checkpoints.
class UntrimmableFamily : public ::testing::TestWithParam<Variant> {};

INSTANTIATE_TEST_SUITE_P(FakeEngine, UntrimmableFamily, ::testing::Values(kVariants[2], kVariants[3], kVariants[4]),
                         [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

TEST_P(UntrimmableFamily, CheckpointOfAnotherPrefixGivesOtherLogits) {
  FakeEngine e(options_for(GetParam()));
  ASSERT_FALSE(memory_is_trimmable(e.model()));
  const auto history = concat(tokens(9, 14), tokens(10, 6));
  ASSERT_EQ(feed(e, 0, history, 0, 14).status, DecodeStatus::ok);
  auto other = history;
  other[13] += 1;  // the same length, one token different, inside every window
  ASSERT_EQ(feed(e, 2, other, 0, 14).status, DecodeStatus::ok);
  const Bytes wrong = e.save_checkpoint(2);
  const Bytes right = e.save_checkpoint(0);
  EXPECT_NE(first(resume(e, 0, 1, 14, wrong, history)), cold(e, std::span(history).first(15)));
  EXPECT_EQ(resume(e, 0, 1, 14, right, history), cold_from(e, history, 14)) << "the same recipe, the right one";
}

TEST_P(EveryFamily, RemovingAWholeSequenceEmptiesIt) {
  FakeEngine e(options_for(GetParam()));
  const auto history = tokens(11, 10);
  ASSERT_EQ(feed(e, 0, history, 0, 10).status, DecodeStatus::ok);
  ASSERT_EQ(feed(e, 1, history, 0, 10).status, DecodeStatus::ok);
  EXPECT_TRUE(e.remove_sequence(0));
  EXPECT_TRUE(e.sequence_positions(0).empty());
  EXPECT_EQ(e.recurrent_position(0), 0);
  EXPECT_FALSE(e.sequence_positions(1).empty());
  const Fed again = feed(e, 0, history, 0, 10);
  ASSERT_EQ(again.status, DecodeStatus::ok);
  EXPECT_EQ(last(again.logits), cold(e, history));
  EXPECT_TRUE(e.remove_sequence(-1));
  EXPECT_EQ(e.used_cells(), 0);
  EXPECT_TRUE(e.sequence_positions(1).empty());
}

TEST_P(EveryFamily, CopiedWholeSequenceContinuesLikeItsSource) {
  FakeEngine e(options_for(GetParam()));
  const auto history = tokens(36, 20);
  ASSERT_EQ(feed(e, 0, history, 0, 14).status, DecodeStatus::ok);
  e.copy_sequence(0, 1);
  const auto branch = concat(std::span(history).first(14), tokens(37, 6));
  const Fed fed = feed(e, 1, branch, 14, 20);
  ASSERT_EQ(fed.status, DecodeStatus::ok);
  EXPECT_EQ(fed.logits, cold_from(e, branch, 14));
  EXPECT_EQ(last(feed(e, 0, history, 14, 20).logits), cold(e, history)) << "the source does not see its copy's tokens";
}

TEST_P(EveryFamily, BatchThatDoesNotFitChangesNothing) {
  FakeEngineOptions options = options_for(GetParam());
  options.n_ctx = 6;
  FakeEngine e(options);
  const auto history = tokens(38, 6);
  ASSERT_EQ(feed(e, 0, history, 0, 4).status, DecodeStatus::ok);
  const std::vector<BatchToken> batch = {{history[4], 4, 0, true}, {history[5], 5, 0, true}, {7, 6, 0, true}};
  if (!has_attention_cells(e.model())) {
    EXPECT_EQ(e.decode(batch), DecodeStatus::ok) << "a recurrent state has no cells to run out of";
    return;
  }
  EXPECT_EQ(e.decode(batch), DecodeStatus::no_kv_space);
  EXPECT_EQ(e.used_cells(), 4);
  EXPECT_EQ(e.recurrent_position(0), GetParam().family == ModelFamily::hybrid ? 4 : 0);
  EXPECT_EQ(last(feed(e, 0, history, 4, 6).logits), cold(e, history));
}

TEST(FakeEngineDense, TrimmedSequenceContinuesExactly) {
  FakeEngine e(options_for(ModelFamily::dense));
  const auto earlier = tokens(12, 20);
  ASSERT_EQ(feed(e, 0, earlier, 0, 20).status, DecodeStatus::ok);
  ASSERT_TRUE(e.remove_sequence(0, 10, -1));
  EXPECT_EQ(e.sequence_positions(0).max, 9);
  const auto history = concat(std::span(earlier).first(10), tokens(13, 5));
  EXPECT_EQ(last(feed(e, 0, history, 10, 15).logits), cold(e, history));
}

TEST(FakeEngineDense, CopyingARangeSharesCells) {
  FakeEngine e(options_for(ModelFamily::dense));
  const auto history = tokens(14, 12);
  ASSERT_EQ(feed(e, 0, history, 0, 12).status, DecodeStatus::ok);
  e.copy_sequence(0, 1, 0, 8);
  EXPECT_EQ(e.used_cells(), 12) << "shared, not copied";
  EXPECT_EQ(e.count_cells([](const std::set<SeqId>& owners) { return owners.size() == 2; }), 8);
  EXPECT_EQ(e.sequence_tokens(1), std::vector<Token>(history.begin(), history.begin() + 8));
}

TEST(FakeEngineSlidingWindow, NeedsAWindow) {
  EXPECT_THROW(FakeEngine({.family = ModelFamily::sliding_window, .sliding_window = 0}), std::invalid_argument);
}

TEST(FakeEngineSlidingWindow, FullWindowCacheTrimsExactly) {
  FakeEngine e(options_for(ModelFamily::sliding_window, true));
  const auto earlier = tokens(15, 20);
  ASSERT_EQ(feed(e, 0, earlier, 0, 20).status, DecodeStatus::ok);
  EXPECT_EQ(e.sequence_positions(0).min, 0) << "every cell kept";
  ASSERT_TRUE(e.remove_sequence(0, 8, -1));
  const auto history = concat(std::span(earlier).first(8), tokens(16, 3));
  EXPECT_EQ(last(feed(e, 0, history, 8, 11).logits), cold(e, history));
}

TEST(FakeEngineSlidingWindow, PrunedWindowKeepsOnlyWhatTheNextPositionReads) {
  FakeEngine e(options_for(ModelFamily::sliding_window, false));
  ASSERT_EQ(feed(e, 0, tokens(17, 20), 0, 20).status, DecodeStatus::ok);
  // Position 20 attends to [16, 20]: the window layer keeps [16, 19], the global layer everything.
  EXPECT_EQ(e.window_positions(0).min, 20 - kWindow + 1);
  EXPECT_EQ(e.window_positions(0).max, 19);
  EXPECT_EQ(e.sequence_positions(0).min, 16) << "positions reported from the window cache, as libllama does";
  EXPECT_EQ(e.used_cells(), 20);
  EXPECT_EQ(e.sequence_tokens(0).size(), 20u);
}

TEST(FakeEngineSlidingWindow, PrunedWindowCannotBeTrimmedExactly) {
  FakeEngine e(options_for(ModelFamily::sliding_window, false));
  const auto earlier = tokens(18, 20);
  ASSERT_EQ(feed(e, 0, earlier, 0, 20).status, DecodeStatus::ok);
  for (const Pos cut : {19, 12}) {
    ASSERT_TRUE(e.remove_sequence(0, cut, -1)) << "a partial removal works on what is left";
    const auto history = concat(std::span(earlier).first(static_cast<size_t>(cut)), tokens(19, 2));
    const Fed fed = feed(e, 0, history, cut, cut + 2);
    ASSERT_EQ(fed.status, DecodeStatus::ok);
    EXPECT_NE(first(fed.logits), cold(e, std::span(history).first(static_cast<size_t>(cut) + 1)))
        << "the window lost cells before " << cut;
  }
}

TEST(FakeEngineSlidingWindow, RebuildNeedsTheCheckpointOfThatPosition) {
  FakeEngine e(options_for(ModelFamily::sliding_window, false));
  const auto history = tokens(20, 24);
  ASSERT_EQ(feed(e, 0, history, 0, 10).status, DecodeStatus::ok);
  const Bytes at_10 = e.save_checkpoint(0);
  ASSERT_EQ(feed(e, 0, history, 10, 12).status, DecodeStatus::ok);
  const Bytes at_12 = e.save_checkpoint(0);
  ASSERT_EQ(feed(e, 0, history, 12, 24).status, DecodeStatus::ok);

  EXPECT_EQ(resume(e, 0, 1, 12, at_12, history), cold_from(e, history, 12));
  const auto short_window = resume(e, 0, 1, 12, at_10, history);
  EXPECT_NE(first(short_window), cold(e, std::span(history).first(13))) << "a window two positions short";
  EXPECT_EQ(last(short_window), cold(e, history)) << "healed once the window moved past the gap";

  // The attention cells alone, without the window: the window layer reads nothing before 12.
  ASSERT_TRUE(e.remove_sequence(1));
  e.copy_sequence(0, 1, 0, 12);
  EXPECT_TRUE(e.sequence_positions(1).empty()) << "the holder's window cells are all past 12";
  const Fed without_window = feed(e, 1, history, 12, 24);
  ASSERT_EQ(without_window.status, DecodeStatus::ok);
  EXPECT_NE(first(without_window.logits), cold(e, std::span(history).first(13)));
}

TEST(FakeEngineSlidingWindow, RestoringACheckpointLeavesTheGlobalCellsAlone) {
  FakeEngine e(options_for(ModelFamily::sliding_window, false));
  const auto history = tokens(21, 16);
  ASSERT_EQ(feed(e, 0, history, 0, 16).status, DecodeStatus::ok);
  const Bytes checkpoint = e.save_checkpoint(0);
  ASSERT_EQ(feed(e, 1, tokens(22, 7), 0, 7).status, DecodeStatus::ok);
  ASSERT_TRUE(e.restore_checkpoint(checkpoint, 1));
  EXPECT_EQ(e.sequence_tokens(1), tokens(22, 7));
  EXPECT_EQ(e.window_positions(1).min, 12);
  EXPECT_EQ(e.window_positions(1).max, 15);
  EXPECT_FALSE(e.restore_checkpoint(Bytes(checkpoint.begin(), checkpoint.end() - 2), 1));
  EXPECT_TRUE(e.window_positions(1).empty()) << "a refused checkpoint leaves no partial state";
  EXPECT_EQ(e.sequence_tokens(1).size(), 7u);
}

TEST(FakeEngineRecurrent, DecodeMustContinueTheStateExactly) {
  FakeEngine e(options_for(ModelFamily::recurrent));
  const auto history = tokens(23, 8);
  EXPECT_EQ(e.decode(std::vector<BatchToken>{{history[0], 1, 0, true}}), DecodeStatus::error)
      << "an empty state starts at 0";
  ASSERT_EQ(feed(e, 0, history, 0, 5).status, DecodeStatus::ok);
  EXPECT_EQ(e.recurrent_position(0), 5);
  EXPECT_EQ(e.decode(std::vector<BatchToken>{{history[5], 6, 0, true}}), DecodeStatus::error) << "a gap";
  EXPECT_EQ(e.decode(std::vector<BatchToken>{{history[4], 4, 0, true}}), DecodeStatus::error) << "an overlap";
  // A batch is all or nothing: the good first token is not consumed when the second one fails.
  EXPECT_EQ(e.decode(std::vector<BatchToken>{{history[5], 5, 0, true}, {history[7], 7, 0, true}}), DecodeStatus::error);
  EXPECT_EQ(e.recurrent_position(0), 5);
  EXPECT_EQ(e.tokens_decoded(), 5);
  EXPECT_EQ(last(feed(e, 0, history, 5, 8).logits), cold(e, history));
  EXPECT_EQ(e.used_cells(), 0) << "no attention cells";
  EXPECT_TRUE(e.sequence_tokens(0).empty());
}

TEST(FakeEngineRecurrent, PositionsReportOnlyTheLastOne) {
  FakeEngine e(options_for(ModelFamily::recurrent));
  EXPECT_TRUE(e.sequence_positions(0).empty());
  ASSERT_EQ(feed(e, 0, tokens(24, 9), 0, 9).status, DecodeStatus::ok);
  EXPECT_EQ(e.sequence_positions(0).min, 8);
  EXPECT_EQ(e.sequence_positions(0).max, 8);
}

TEST(FakeEngineRecurrent, CopyTakesTheWholeStateWhateverTheRange) {
  FakeEngine e(options_for(ModelFamily::recurrent));
  const auto history = tokens(25, 14);
  ASSERT_EQ(feed(e, 0, history, 0, 10).status, DecodeStatus::ok);
  ASSERT_EQ(feed(e, 1, tokens(26, 3), 0, 3).status, DecodeStatus::ok);
  e.copy_sequence(0, 1, 0, 4);
  EXPECT_EQ(e.recurrent_position(1), 10);
  EXPECT_EQ(last(feed(e, 1, history, 10, 14).logits), cold(e, history));
  e.copy_sequence(2, 1);  // an empty source empties the destination
  EXPECT_EQ(e.recurrent_position(1), 0);
}

TEST(FakeEngineRecurrent, PartialRemovalIsRefusedUnlessItStartsPastTheState) {
  FakeEngine e(options_for(ModelFamily::recurrent));
  const auto history = tokens(27, 12);
  ASSERT_EQ(feed(e, 0, history, 0, 10).status, DecodeStatus::ok);
  EXPECT_FALSE(e.remove_sequence(0, 4, -1));
  EXPECT_FALSE(e.remove_sequence(0, 9, -1)) << "even the last position";
  // From 0 short of the last position: libllama 0.7.0 accepts it and keeps the state (a hybrid
  // model loses the attention cells in the range).
  EXPECT_TRUE(e.remove_sequence(0, 0, 5));
  EXPECT_EQ(e.recurrent_position(0), 10);
  EXPECT_FALSE(e.remove_sequence(-1, 3, -1));
  EXPECT_EQ(e.recurrent_position(0), 10);
  EXPECT_TRUE(e.remove_sequence(0, 10, -1)) << "nothing consumed there";
  EXPECT_TRUE(e.remove_sequence(0, 15, 20));
  EXPECT_EQ(e.recurrent_position(0), 10);
  EXPECT_EQ(last(feed(e, 0, history, 10, 12).logits), cold(e, history));
  EXPECT_TRUE(e.remove_sequence(0, 0, -1));
  EXPECT_EQ(e.recurrent_position(0), 0);
}

TEST(FakeEngineRecurrent, CheckpointAtAnotherPositionCannotContinue) {
  FakeEngine e(options_for(ModelFamily::recurrent));
  const auto history = tokens(28, 16);
  ASSERT_EQ(feed(e, 0, history, 0, 8).status, DecodeStatus::ok);
  const Bytes at_8 = e.save_checkpoint(0);
  ASSERT_TRUE(e.restore_checkpoint(at_8, 1));
  EXPECT_EQ(e.recurrent_position(1), 8);
  EXPECT_EQ(feed(e, 1, history, 10, 16).status, DecodeStatus::error);
  EXPECT_FALSE(e.restore_checkpoint(Bytes(at_8.begin(), at_8.end() - 1), 1));
  EXPECT_EQ(e.recurrent_position(1), 0) << "a refused checkpoint leaves no partial state";
}

TEST(FakeEngineHybrid, DecodeAddsCellsAndFollowsTheRecurrentRule) {
  FakeEngine e(options_for(ModelFamily::hybrid));
  const auto history = tokens(29, 9);
  ASSERT_EQ(feed(e, 0, history, 0, 9).status, DecodeStatus::ok);
  EXPECT_EQ(e.used_cells(), 9);
  EXPECT_EQ(e.recurrent_position(0), 9);
  EXPECT_EQ(e.sequence_positions(0).min, 8);
  EXPECT_EQ(e.sequence_positions(0).max, 8);
  EXPECT_EQ(e.decode(std::vector<BatchToken>{{1, 3, 0, true}}), DecodeStatus::error);
  EXPECT_EQ(e.used_cells(), 9) << "a refused batch adds no cell";
}

TEST(FakeEngineHybrid, CopyTakesTheCellsInRangeAndTheWholeState) {
  FakeEngine e(options_for(ModelFamily::hybrid));
  const auto history = tokens(30, 12);
  ASSERT_EQ(feed(e, 0, history, 0, 10).status, DecodeStatus::ok);
  e.copy_sequence(0, 1, 0, 6);
  EXPECT_EQ(e.sequence_tokens(1).size(), 6u);
  EXPECT_EQ(e.recurrent_position(1), 10);
  // The state says 10 positions, the attention holds 6: continuing works but reads a wrong history.
  const Fed fed = feed(e, 1, history, 10, 12);
  ASSERT_EQ(fed.status, DecodeStatus::ok);
  EXPECT_NE(last(fed.logits), cold(e, history));
}

TEST(FakeEngineHybrid, PartialRemovalIsRefusedAndChangesNothing) {
  FakeEngine e(options_for(ModelFamily::hybrid));
  const auto history = tokens(31, 12);
  ASSERT_EQ(feed(e, 0, history, 0, 10).status, DecodeStatus::ok);
  EXPECT_FALSE(e.remove_sequence(0, 6, -1));
  EXPECT_EQ(e.sequence_tokens(0).size(), 10u);
  EXPECT_EQ(e.recurrent_position(0), 10);
  EXPECT_TRUE(e.remove_sequence(0, 10, -1));
  EXPECT_EQ(last(feed(e, 0, history, 10, 12).logits), cold(e, history));
  EXPECT_TRUE(e.remove_sequence(0));
  EXPECT_EQ(e.used_cells(), 0);
  EXPECT_EQ(e.recurrent_position(0), 0);
}

TEST(FakeEngineHybrid, CheckpointWithoutTheAttentionCellsGivesOtherLogits) {
  FakeEngine e(options_for(ModelFamily::hybrid));
  const auto history = tokens(32, 14);
  ASSERT_EQ(feed(e, 0, history, 0, 10).status, DecodeStatus::ok);
  const Bytes checkpoint = e.save_checkpoint(0);
  ASSERT_TRUE(e.restore_checkpoint(checkpoint, 1));
  EXPECT_EQ(e.sequence_tokens(1).size(), 0u) << "a checkpoint holds no attention cells";
  EXPECT_TRUE(e.sequence_positions(1).empty()) << "libllama reports what both parts hold";
  const Fed fed = feed(e, 1, history, 10, 14);
  ASSERT_EQ(fed.status, DecodeStatus::ok);
  EXPECT_NE(last(fed.logits), cold(e, history));
}

TEST(FakeEngineHybrid, RestoringACheckpointLeavesTheAttentionCellsAlone) {
  FakeEngine e(options_for(ModelFamily::hybrid));
  ASSERT_EQ(feed(e, 0, tokens(33, 6), 0, 6).status, DecodeStatus::ok);
  const Bytes checkpoint = e.save_checkpoint(0);
  ASSERT_EQ(feed(e, 1, tokens(34, 9), 0, 9).status, DecodeStatus::ok);
  ASSERT_TRUE(e.restore_checkpoint(checkpoint, 1));
  EXPECT_EQ(e.sequence_tokens(1), tokens(34, 9));
  EXPECT_EQ(e.recurrent_position(1), 6);
  EXPECT_EQ(e.used_cells(), 15);
}

}  // namespace
}  // namespace prefixd::engine
