// The reuse planner's policy: the family's sources, the ranking of their offers, waiting for a
// running request, and the tier credited. The cache tests check that acquire follows it against
// real cells; these pin each rule and every tie.
#include <gtest/gtest.h>

#include <array>
#include <memory>

#include "cache/reuse_plan.h"

namespace prefixd::cache {
namespace {

// A family of each mode: dense (trim) and a window-only sliding-window model in one pool
// (checkpoints, with the window source).
std::unique_ptr<const Family> family_of(ReuseMode mode) {
  engine::ModelInfo model;
  if (mode == ReuseMode::checkpoints) {
    model.family = engine::ModelFamily::sliding_window;
    model.sliding_window = 8;
  }
  return Family::of(model);
}

std::span<const Source> sources(ReuseMode mode) {
  static const std::unique_ptr<const Family> trim = family_of(ReuseMode::trim);
  static const std::unique_ptr<const Family> checkpoints = family_of(ReuseMode::checkpoints);
  return mode == ReuseMode::trim ? trim->sources() : checkpoints->sources();
}

std::optional<Source> chosen(ReuseMode mode, std::initializer_list<Offer> offers, std::int32_t min_prefix = 4) {
  const std::optional<Offer> got =
      choose(sources(mode), std::span<const Offer>(offers.begin(), offers.size()), min_prefix);
  if (!got) return std::nullopt;
  return got->source;
}

TEST(ReusePlan, EachFamilyResumesOnlyFromItsOwnSources) {
  EXPECT_EQ(sources(ReuseMode::trim).size(), 3U);
  EXPECT_EQ(sources(ReuseMode::checkpoints).size(), 3U);
  // A checkpoint family cannot resume from a prefix of cells alone, whatever it reaches.
  EXPECT_EQ(chosen(ReuseMode::checkpoints, {{Source::device, 90}, {Source::host, 80}}), std::nullopt);
  EXPECT_EQ(chosen(ReuseMode::trim, {{Source::checkpoint, 90}, {Source::entry_state, 80}}), std::nullopt);
}

TEST(ReusePlan, TheLongestOfferWinsAndTiesGoToTheCheapestSource) {
  const auto trim = ReuseMode::trim;
  EXPECT_EQ(chosen(trim, {{Source::device, 10}, {Source::running, 30}, {Source::host, 20}}), Source::running);
  EXPECT_EQ(chosen(trim, {{Source::device, 20}, {Source::running, 20}, {Source::host, 20}}), Source::device);
  EXPECT_EQ(chosen(trim, {{Source::device, 2}, {Source::running, 20}, {Source::host, 20}}), Source::running);
  EXPECT_EQ(chosen(trim, {{Source::device, 19}, {Source::running, 0}, {Source::host, 20}}), Source::host);
  const auto ckpt = ReuseMode::checkpoints;
  EXPECT_EQ(chosen(ckpt, {{Source::entry_state, 40}, {Source::checkpoint, 40}, {Source::window, 40}}),
            Source::entry_state);
  EXPECT_EQ(chosen(ckpt, {{Source::entry_state, 0}, {Source::checkpoint, 40}, {Source::window, 40}}),
            Source::checkpoint)
      << "a kept state is preferred to rebuilding the window from cells";
  EXPECT_EQ(chosen(ckpt, {{Source::entry_state, 39}, {Source::checkpoint, 40}, {Source::window, 41}}), Source::window);
}

TEST(ReusePlan, OffersShorterThanTheMinimumAreNeverChosen) {
  EXPECT_EQ(chosen(ReuseMode::trim, {{Source::device, 3}, {Source::host, 3}}, 4), std::nullopt);
  EXPECT_EQ(chosen(ReuseMode::trim, {{Source::device, 3}, {Source::host, 4}}, 4), Source::host);
  EXPECT_EQ(chosen(ReuseMode::checkpoints, {{Source::checkpoint, 3}}, 4), std::nullopt);
}

TEST(ReusePlan, ARunningRequestIsWaitedForOnlyWhenItHasLessLeftThanThisRequestWould) {
  // It shares 100 tokens and computed 60: 40 left, against 100 - 50 = 50 to compute without it.
  EXPECT_TRUE(worth_waiting(100, 60, 50, 4));
  EXPECT_FALSE(worth_waiting(100, 40, 50, 4)) << "60 left against 50";
  EXPECT_TRUE(worth_waiting(100, 50, 50, 4)) << "even: its work runs anyway";
  EXPECT_FALSE(worth_waiting(50, 50, 50, 4)) << "it reaches no further than what is offered now";
  EXPECT_FALSE(worth_waiting(3, 3, 0, 4)) << "shorter than the minimum prefix";
}

TEST(ReusePlan, TheDeepestTierThatServedPartOfThePrefixIsCredited) {
  EXPECT_EQ(credited_tier(0, {}), Tier::none);
  EXPECT_EQ(credited_tier(40, {.device = 40}), Tier::device);
  // A device hit is a copy within the context even when the shared tier was consulted earlier.
  EXPECT_EQ(credited_tier(40, {.device = 40, .remote_from = 10}), Tier::device);
  EXPECT_EQ(credited_tier(60, {.device = 40, .host = 60}), Tier::host);
  EXPECT_EQ(credited_tier(80, {.device = 40, .host = 60}), Tier::disk) << "past what host held before promotion";
  EXPECT_EQ(credited_tier(80, {.device = 40, .host = 60, .remote_from = 70}), Tier::remote);
  EXPECT_EQ(credited_tier(70, {.device = 40, .host = 60, .remote_from = 70}), Tier::disk);
  // Checkpoint families: the state's own source counts even when every cell was on the device.
  EXPECT_EQ(credited_tier(40, {.device = 40, .state_restored = true}), Tier::device);
  EXPECT_EQ(credited_tier(40, {.device = 40, .state_restored = true, .state_from_disk = true}), Tier::disk);
  EXPECT_EQ(credited_tier(40, {.device = 40, .state_restored = true, .remote_from = 30}), Tier::remote);
}

}  // namespace
}  // namespace prefixd::cache
