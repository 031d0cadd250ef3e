// Where the scheduler thread's time goes (scheduler/step_clock.h): every instant counted once, in
// the innermost phase open or as a wait; a request's share of the steps; and the scheduler's step
// stats over the FakeEngine: a step per token, phases that add up to the step, model calls in
// compute. No assertion depends on how fast the machine is, only on the clock never going back.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "scheduler/scheduler.h"
#include "scheduler/step_clock.h"
#include "support/fake_engine.h"

namespace prefixd::scheduler {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(StepClock, EveryInstantSinceItStartedIsCountedOnceInAPhaseOrAsAWait) {
  const auto before_start = Clock::now();
  StepClock clock;
  const auto after_start = Clock::now();
  std::this_thread::sleep_for(1ms);
  clock.begin_turn();
  {
    const StepClock::Scope in_model = clock.enter(StepPhase::compute);
    const StepClock::Scope in_cache = clock.enter(StepPhase::cache);
  }
  const StepClock::Turn turn = clock.end_turn(true);
  const auto before_reading = Clock::now();
  const StepTally tally = clock.so_far();
  const auto after_reading = Clock::now();
  EXPECT_GE(tally.times.total() + tally.waits, before_reading - after_start);
  EXPECT_LE(tally.times.total() + tally.waits, after_reading - before_start);
  ASSERT_TRUE(turn.step.has_value());
  EXPECT_EQ(tally.steps, 1);
  EXPECT_EQ(tally.times.total(), turn.step->total());
  EXPECT_GE(turn.waited, 1ms) << "the time before the turn is its wait";
}

TEST(StepClock, TimeGoesToTheInnermostPhaseOpenAndBackToTheOuterOneAfterIt) {
  StepClock clock;
  clock.begin_turn();
  const StepClock::Scope in_model = clock.enter(StepPhase::compute);
  {
    const StepClock::Scope in_sampling = clock.enter(StepPhase::sampling);
    const StepTally first = clock.so_far();
    std::this_thread::sleep_for(2ms);
    const StepTally second = clock.so_far();
    EXPECT_EQ(second.times[StepPhase::compute], first.times[StepPhase::compute]) << "the outer phase stands still";
    EXPECT_GE(second.times[StepPhase::sampling] - first.times[StepPhase::sampling], 2ms);
  }
  const StepTally first = clock.so_far();
  std::this_thread::sleep_for(2ms);
  const StepTally second = clock.so_far();
  EXPECT_EQ(second.times[StepPhase::sampling], first.times[StepPhase::sampling]);
  EXPECT_GE(second.times[StepPhase::compute] - first.times[StepPhase::compute], 2ms);
  EXPECT_EQ(second.times[StepPhase::scheduling], first.times[StepPhase::scheduling]);
  EXPECT_EQ(second.waits, first.waits);
}

TEST(StepClock, ATurnThatFoundNoWorkCountsAsWaitingNotAsAStep) {
  StepClock clock;
  clock.begin_turn();
  {
    const StepClock::Scope in_cache = clock.enter(StepPhase::cache);
    std::this_thread::sleep_for(1ms);
  }
  const StepClock::Turn turn = clock.end_turn(false);
  EXPECT_FALSE(turn.step.has_value());
  EXPECT_GE(turn.waited, 1ms);
  const StepTally tally = clock.so_far();
  EXPECT_EQ(tally.steps, 0);
  EXPECT_EQ(tally.times.total(), StepTimes::Duration::zero());
}

TEST(StepShare, CountsTheStepsFromTheOneItJoinedToTheOneItLeftAndTheWaitsBetween) {
  StepClock clock;
  StepShare share;
  clock.begin_turn();  // step 1: it joins
  share.join(clock);
  (void)clock.end_turn(true);
  std::this_thread::sleep_for(1ms);
  clock.begin_turn();  // step 2: it leaves (preempted) and is admitted again at once
  share.leave(clock);
  share.join(clock);
  (void)clock.end_turn(true);
  clock.begin_turn();  // step 3
  (void)clock.end_turn(true);
  clock.begin_turn();  // step 4: it finishes
  {
    const StepClock::Scope in_model = clock.enter(StepPhase::compute);
    std::this_thread::sleep_for(1ms);
  }
  share.leave(clock);
  (void)clock.end_turn(true);
  clock.begin_turn();  // step 5: not its
  (void)clock.end_turn(true);
  EXPECT_EQ(share.tally().steps, 4) << "step 2, left and joined again, counts once";
  EXPECT_GE(share.tally().waits, 1ms);
  EXPECT_LE(share.tally().waits, clock.so_far().waits);
  EXPECT_GE(share.tally().times[StepPhase::compute], 1ms);
}

GenerationRequest greedy(std::string_view prompt, int max_tokens) {
  GenerationRequest r;
  for (unsigned char c : prompt) r.prompt.push_back(c);
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.max_tokens = max_tokens;
  return r;
}

// One request alone: one sampled token per step, so the decode steps are its tokens; every step
// has one observation per phase, the phases' sums add up to the steps' sum exactly, and the model
// calls (each made to take 1 ms) are in compute.
TEST(SchedulerSteps, EachTokenTakesADecodeStepAndThePhasesAddUpToTheSteps) {
  engine::FakeEngine engine({.n_ctx = 512, .n_batch = 16, .n_seq = 4, .n_vocab = 257,
                             .before_decode = [] { std::this_thread::sleep_for(1ms); }});
  Scheduler scheduler(engine, {.n_slots = 2, .cache_holders = 0});
  constexpr int kTokens = 12;
  auto stream = scheduler.submit(greedy("hello there, how are you?", kTokens));
  ASSERT_TRUE(stream.has_value());
  std::int32_t generated = 0;
  for (;;) {
    auto event = (*stream)->next(10s);
    ASSERT_TRUE(event.has_value()) << "stream timed out";
    if (event->kind != StreamEvent::Kind::done) continue;
    EXPECT_EQ(event->finish, FinishReason::length);
    generated = event->usage.completion_tokens;
    break;
  }
  ASSERT_EQ(generated, kTokens);
  // The step that finished the request is recorded as the loop turns after it.
  SchedulerStats stats = scheduler.stats();
  for (const auto deadline = Clock::now() + 10s; stats.decode_steps_total < kTokens && Clock::now() < deadline;) {
    std::this_thread::sleep_for(1ms);
    stats = scheduler.stats();
  }
  EXPECT_EQ(stats.decode_steps_total, kTokens);
  // The prompt's 25 tokens take two steps, the second of which draws the first token.
  EXPECT_GE(stats.steps.count, kTokens + 1);
  StepTimes::Duration phases_sum{};
  for (const StepPhase phase : kStepPhases) {
    const SchedulerStats::StepHistogram& h = stats.step_phases[static_cast<size_t>(phase)];
    EXPECT_EQ(h.count, stats.steps.count) << step_phase_name(phase);
    EXPECT_EQ(h.buckets.back(), h.count) << "the 10 s bucket holds every step of a test this short";
    phases_sum += h.sum;
  }
  EXPECT_EQ(phases_sum, stats.steps.sum);
  EXPECT_GE(stats.step_phases[static_cast<size_t>(StepPhase::compute)].sum, (kTokens + 1) * 1ms)
      << "the prefill call and every decode call sleep 1 ms in the engine";
  EXPECT_GT(stats.idle, StepTimes::Duration::zero());
}

}  // namespace
}  // namespace prefixd::scheduler
