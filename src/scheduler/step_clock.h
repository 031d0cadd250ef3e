// prefixd scheduler — where the scheduler thread's time goes, measured on that thread without a
// profiler. Each turn of its loop that did work is a step, split into phases; the turns' waits for
// work are counted apart. /metrics shows every step (prefixd_step_seconds, by phase
// prefixd_step_phase_seconds) and the waits; each finished request's debug line shows its share.
// The cost is two clock reads per phase entered, no allocation and no lock (only the scheduler
// thread uses a StepClock).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace prefixd::scheduler {

// What a step's time is spent on. Each instant of a step belongs to exactly one phase: that of the
// innermost StepClock::Scope open at that instant, else `scheduling`.
//  - compute: inside the engine's model calls: decode, decode_padded, decode_embeddings, the vision
//    encoder, the draft model's decodes.
//  - sampling: drawing tokens: the sampler's draws (those verifying a draft too), logprobs, handing
//    a draw the grammar refused to MaskedDraws.
//  - output: turning tokens into text and events: detokenizing, stop strings, pushing text,
//    progress and done events to the request's stream.
//  - cache: the prompt cache's work on this thread: its idle work (tick), making room for the step,
//    tickets and admission, advancing sequences, donating or releasing them, publishing KV events,
//    and the commands other threads queue (cache admin, reset).
//  - scheduling: the rest: admission's bookkeeping, building batches, planning drafts, saving and
//    restoring a recurrent state around a draft, the loop itself.
enum class StepPhase : std::uint8_t { compute, sampling, output, cache, scheduling };
inline constexpr std::size_t kStepPhaseCount = 5;
inline constexpr std::array<StepPhase, kStepPhaseCount> kStepPhases = {
    StepPhase::compute, StepPhase::sampling, StepPhase::output, StepPhase::cache, StepPhase::scheduling};
std::string_view step_phase_name(StepPhase phase);

// The time of a step, or of several summed, by phase. Invariant: the phases sum to the steps' wall
// time (total()), as each instant is counted in one phase only.
struct StepTimes {
  using Duration = std::chrono::steady_clock::duration;
  std::array<Duration, kStepPhaseCount> phases{};

  Duration& operator[](StepPhase phase) { return phases[static_cast<std::size_t>(phase)]; }
  Duration operator[](StepPhase phase) const { return phases[static_cast<std::size_t>(phase)]; }
  Duration total() const;
  StepTimes& operator+=(const StepTimes& other);
  StepTimes& operator-=(const StepTimes& other);
};

// Steps counted together: how many, their times by phase, and the waits for work between them.
struct StepTally {
  std::int64_t steps = 0;
  StepTimes times;
  StepTimes::Duration waits{};

  StepTally& operator+=(const StepTally& other);
  StepTally& operator-=(const StepTally& other);
};

// Splits the scheduler thread's time into turns of its loop and, within a turn, phases. Between
// end_turn() and the next begin_turn() the thread waits for work. Every instant since construction
// is counted once: in a phase of a step, or as a wait (so_far().times.total() + so_far().waits is
// the time since construction). Scopes nest, innermost first, and end in reverse order, as lexical
// scopes do.
class StepClock {
 public:
  using Clock = std::chrono::steady_clock;

  StepClock();  // waiting from now

  // Until it ends, the time goes to `phase`; then back to the phase open before it.
  class [[nodiscard]] Scope {
   public:
    ~Scope() { clock_.switch_to(previous_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    friend class StepClock;
    Scope(StepClock& clock, StepPhase phase) : clock_(clock), previous_(clock.current_) {
      clock.switch_to(static_cast<std::size_t>(phase));
    }
    StepClock& clock_;
    std::size_t previous_;
  };
  Scope enter(StepPhase phase) { return Scope(*this, phase); }

  // A turn as end_turn() counted it: its times when it was a step, and the wait before it (with
  // the whole turn when it was none).
  struct Turn {
    std::optional<StepTimes> step;
    StepTimes::Duration waited{};
  };
  // The wait for work ended: a turn begins, in `scheduling` until a scope opens.
  void begin_turn();
  // The turn ends and the wait for the next begins. A turn that did work is a step; one that did
  // none (a wake-up that found nothing to do) counts as waiting.
  Turn end_turn(bool did_work);

  // Every step and wait so far: the turns ended, and the open one up to now, counted as a step.
  // Two readings taken in steps bound a stretch of them (StepShare).
  StepTally so_far() const;

 private:
  static constexpr std::size_t kWaiting = kStepPhaseCount;  // the index of the wait in `turn_`
  void switch_to(std::size_t activity);

  std::array<StepTimes::Duration, kStepPhaseCount + 1> turn_{};  // the open turn's phases, its wait before
  std::size_t current_ = kWaiting;
  Clock::time_point since_;  // when `current_` was entered last
  bool in_turn_ = false;
  StepTally ended_;  // the turns ended
};

// A request's share of the steps: those it took part in while it held a sequence, from the instant
// it joined (admitted, in the step that admits it) to the instant it left (finished, or back to
// the queue: the share goes with it, and goes on when it is admitted again), and the waits for work
// between them. Whole steps but the first and last, which count from and up to those instants.
class StepShare {
 public:
  void join(const StepClock& clock);
  void leave(const StepClock& clock);
  const StepTally& tally() const { return total_; }

 private:
  StepTally total_;
  StepTally joined_;
  std::int64_t left_in_ = -1;  // the step it last left in (so_far().steps then)
};

}  // namespace prefixd::scheduler
