// prefixd speculative — whether a draft pays, and how long it should be. A draft of k tokens adds
// k rows to its request's call: on a GPU nearly free, on a CPU each row costs most of what a lone
// decode row does (2 cores, a 0.5B Q8_0 model: 21 ms for one row, about 14 ms per row more). So
// the length is chosen from measurements, not fixed:
//  - RowCosts: the measured time of the calls that sample (one row; more rows, per row);
//  - DraftRecord: how many of a request's drafted tokens were accepted, which with the draft's
//    match length estimates the chance that its next guessed token is right;
//  - best_draft_length: the length that gives the call's requests the most tokens per second, the
//    draft's expected accepted tokens against the time its rows add to everyone in the call.
// Wrong guesses then cost little: as a request's guesses fail, its estimated chance falls and it
// stops drafting where the rows would cost more than they are expected to yield.
// Must not know: the scheduler, the cache, the model runtime.
#pragma once

#include <cstdint>
#include <optional>

namespace prefixd::speculative {

// Exponential averages of the sampled calls' times, by their rows.
class RowCosts {
 public:
  void observe(std::int32_t rows, double seconds);
  // What a call of `rows` rows costs, in seconds; nullopt until calls of one row and of more rows
  // were both measured.
  std::optional<double> call_seconds(std::int32_t rows) const;

 private:
  static constexpr double kWeight = 0.1;  // of each new observation
  double lone_ = 0;        // one-row calls, seconds
  double multi_ = 0;       // calls of two rows or more, seconds
  double multi_rows_ = 0;  // and their rows
  bool has_lone_ = false;
  bool has_multi_ = false;
};

// One request's drafts so far.
class DraftRecord {
 public:
  void observe(std::int32_t drafted, std::int32_t accepted);
  // The chance that the next guessed token is right, for a draft repeating `match` context tokens:
  // the request's accepted tokens against its rejections, after a prior of match / (match + 2)
  // worth kPriorWeight observations (a long match is more often followed as it was before).
  double acceptance(std::int32_t match) const;

  std::int32_t drafted() const { return drafted_; }
  std::int32_t accepted() const { return accepted_; }

 private:
  static constexpr double kPriorWeight = 4;
  std::int32_t drafted_ = 0;
  std::int32_t accepted_ = 0;
  std::int32_t rejections_ = 0;  // verifications that rejected a guessed token
};

// The draft length in [fewest, most] that maximizes the call's expected tokens per second, or 0
// when no draft promises a tenth more than none. `other_rows`: the rows the call holds besides
// this request's decode row (each yields about one token). Each guessed token is right with chance
// `acceptance`, given the ones before it were. Without measured costs (a fresh server) the answer
// is the shortest draft, `fewest`: it measures them at the least cost. `seconds_per_guess`: what
// making each guessed token costs beside the call (a draft model's call; 0 for n-gram guesses).
std::int32_t best_draft_length(const RowCosts& costs, double acceptance, std::int32_t other_rows, std::int32_t fewest,
                               std::int32_t most, double seconds_per_guess = 0);

}  // namespace prefixd::speculative
