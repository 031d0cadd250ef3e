#include "scheduler/step_clock.h"

namespace prefixd::scheduler {

std::string_view step_phase_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::compute: return "compute";
    case StepPhase::sampling: return "sampling";
    case StepPhase::output: return "output";
    case StepPhase::cache: return "cache";
    case StepPhase::scheduling: return "scheduling";
  }
  return "unknown";
}

StepTimes::Duration StepTimes::total() const {
  Duration sum{};
  for (const Duration phase : phases) sum += phase;
  return sum;
}

StepTimes& StepTimes::operator+=(const StepTimes& other) {
  for (std::size_t i = 0; i < kStepPhaseCount; ++i) phases[i] += other.phases[i];
  return *this;
}

StepTimes& StepTimes::operator-=(const StepTimes& other) {
  for (std::size_t i = 0; i < kStepPhaseCount; ++i) phases[i] -= other.phases[i];
  return *this;
}

StepTally& StepTally::operator+=(const StepTally& other) {
  steps += other.steps;
  times += other.times;
  waits += other.waits;
  return *this;
}

StepTally& StepTally::operator-=(const StepTally& other) {
  steps -= other.steps;
  times -= other.times;
  waits -= other.waits;
  return *this;
}

StepClock::StepClock() : since_(Clock::now()) {}

// The one place time is read: what passed since the last switch goes to the activity it ends.
void StepClock::switch_to(std::size_t activity) {
  const Clock::time_point now = Clock::now();
  turn_[current_] += now - since_;
  since_ = now;
  current_ = activity;
}

void StepClock::begin_turn() {
  switch_to(static_cast<std::size_t>(StepPhase::scheduling));
  in_turn_ = true;
}

StepClock::Turn StepClock::end_turn(bool did_work) {
  switch_to(kWaiting);
  StepTimes times;
  for (std::size_t i = 0; i < kStepPhaseCount; ++i) times.phases[i] = turn_[i];
  Turn turn{.step = std::nullopt, .waited = turn_[kWaiting]};
  if (did_work) {
    turn.step = times;
    ended_.steps += 1;
    ended_.times += times;
  } else {
    turn.waited += times.total();
  }
  ended_.waits += turn.waited;
  turn_ = {};  // the wait for the next turn accrues from `since_`, now
  in_turn_ = false;
  return turn;
}

StepTally StepClock::so_far() const {
  std::array<StepTimes::Duration, kStepPhaseCount + 1> spent = turn_;
  spent[current_] += Clock::now() - since_;
  StepTally tally = ended_;
  tally.steps += in_turn_ ? 1 : 0;
  for (std::size_t i = 0; i < kStepPhaseCount; ++i) tally.times.phases[i] += spent[i];
  tally.waits += spent[kWaiting];
  return tally;
}

void StepShare::join(const StepClock& clock) {
  joined_ = clock.so_far();
  // Back in the step it left (a preempted request admitted again at once): that step counts once.
  if (joined_.steps == left_in_) joined_.steps += 1;
}

// The stretch since join(): the time between the readings, and the steps from the one it joined in
// to the one it leaves in, both included.
void StepShare::leave(const StepClock& clock) {
  const StepTally now = clock.so_far();
  StepTally stretch = now;
  stretch -= joined_;
  stretch.steps += 1;
  total_ += stretch;
  left_in_ = now.steps;
}

}  // namespace prefixd::scheduler
