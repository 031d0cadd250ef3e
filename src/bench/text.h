// prefixd bench — seeded text and lengths for the workloads. Everything is a pure function of
// its arguments, so a workload is the same on both servers and on every run.
#pragma once

#include <cstdint>
#include <string>

#include "bench/prompts.h"

namespace prefixd::bench {

// A seed for one piece of a workload, derived from the workload seed and a few labels (session,
// turn, role), so that adding a session does not shift every other session's text.
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0);

// English-looking text of about `tokens` tokens, given the tokenizer's measured words per token.
std::string text_of(std::uint64_t seed, int tokens, double words_per_token);

// A token length scaled by BENCH_SCALE, never below `floor`.
int scaled(int tokens, double scale, int floor = 1);

// Lengths of a turn, drawn the way public multi-turn chat traces look: log-normal with a long
// tail, clipped. Lengths are in tokens at BENCH_SCALE 1.
struct LogNormal {
  double median = 1;
  double sigma = 0;
  int lo = 1;
  int hi = 1 << 20;
};
int draw_length(SeededRng& rng, const LogNormal& shape, double scale);

// A uniform draw in [0, 1) with 53 bits, from the same portable generator.
double uniform01(SeededRng& rng);

}  // namespace prefixd::bench
