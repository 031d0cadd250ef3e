// The family policy objects (cache/family.h): which class a model's memory maps to, and the
// answers every component asks them for instead of the model's family.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "cache/family.h"

namespace prefixd::cache {
namespace {

engine::ModelInfo model_of(engine::ModelFamily family, bool swa_full = false, bool cells_shared = true) {
  engine::ModelInfo model;
  model.family = family;
  model.sliding_window = family == engine::ModelFamily::sliding_window ? 64 : 0;
  model.swa_full = swa_full;
  model.cells_shared = cells_shared;
  return model;
}

bool has_source(const Family& family, Source source) { return std::ranges::contains(family.sources(), source); }

TEST(FamilyPolicy, DenseModelsResumeAnyPrefixOfCellsAndDraftForOthers) {
  const auto dense = Family::of(model_of(engine::ModelFamily::dense));
  EXPECT_EQ(dense->name(), "dense");
  EXPECT_TRUE(dense->trimmable());
  EXPECT_TRUE(dense->keeps_cells());
  EXPECT_TRUE(dense->waits_for_running());
  EXPECT_FALSE(dense->checkpoints_at_turns());
  EXPECT_TRUE(dense->compactable());
  EXPECT_TRUE(dense->shiftable());
  EXPECT_TRUE(dense->can_draft());
  EXPECT_EQ(dense->draft_rollback(), DraftRollback::cut);
  EXPECT_EQ(dense->window(), 0);
  EXPECT_FALSE(dense->may_lose_start());
  EXPECT_TRUE(has_source(*dense, Source::host));
  EXPECT_FALSE(has_source(*dense, Source::checkpoint));
}

TEST(FamilyPolicy, TheFullWindowCacheIsTrimmedLikeDenseButMustHoldItsStart) {
  const auto full = Family::of(model_of(engine::ModelFamily::sliding_window, true));
  EXPECT_TRUE(full->trimmable());
  EXPECT_TRUE(full->may_lose_start());
  EXPECT_FALSE(full->keeps_only_window());
  EXPECT_EQ(full->window(), 64);
  EXPECT_FALSE(full->can_draft());
  EXPECT_EQ(full->draft_rollback(), DraftRollback::cut);
  EXPECT_NE(full->shift_remedy().find("--swa-full on"), std::string_view::npos);
  EXPECT_TRUE(full->window_intact(1000, 10)) << "nothing is cut below a full window cache";
}

TEST(FamilyPolicy, AWindowOnlyCacheResumesAtKeptStatesAndKnowsWhatItsWindowNeeds) {
  const auto window = Family::of(model_of(engine::ModelFamily::sliding_window, false));
  EXPECT_FALSE(window->trimmable());
  EXPECT_TRUE(window->keeps_only_window());
  EXPECT_TRUE(window->checkpoints_at_turns());
  EXPECT_FALSE(window->waits_for_running());
  EXPECT_FALSE(window->compactable());
  EXPECT_TRUE(has_source(*window, Source::window));
  // The state after 100 positions attends to positions from 37 on (a window of 64 with the next
  // position): a run from 37 still holds it, one from 38 does not.
  EXPECT_TRUE(window->window_intact(37, 100));
  EXPECT_FALSE(window->window_intact(38, 100));
  EXPECT_EQ(window->window_start(100), 36);
  EXPECT_EQ(window->window_start(10), 0);
  // With a stream per sequence a copy carries only the window of the last position.
  const auto streams = Family::of(model_of(engine::ModelFamily::sliding_window, false, false));
  EXPECT_FALSE(has_source(*streams, Source::window));
  EXPECT_FALSE(streams->shares_cells());
}

TEST(FamilyPolicy, RecurrentAndHybridModelsRollDraftsBackAtCheckpoints) {
  const auto recurrent = Family::of(model_of(engine::ModelFamily::recurrent));
  const auto hybrid = Family::of(model_of(engine::ModelFamily::hybrid));
  for (const Family* family : {recurrent.get(), hybrid.get()}) {
    EXPECT_EQ(family->mode(), ReuseMode::checkpoints) << family->name();
    EXPECT_EQ(family->draft_rollback(), DraftRollback::checkpoint) << family->name();
    EXPECT_FALSE(family->can_draft()) << family->name();
    EXPECT_FALSE(family->shiftable()) << family->name();
    EXPECT_FALSE(has_source(*family, Source::window)) << family->name();
    EXPECT_TRUE(has_source(*family, Source::checkpoint)) << family->name();
  }
  EXPECT_FALSE(recurrent->keeps_cells());
  EXPECT_TRUE(hybrid->keeps_cells());
}

}  // namespace
}  // namespace prefixd::cache
