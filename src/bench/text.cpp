#include "bench/text.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace prefixd::bench {

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  // Three SplitMix64 rounds over the labels: cheap, portable and well mixed.
  SeededRng rng(seed ^ 0x243f'6a88'85a3'08d3ull);
  std::uint64_t h = rng.next();
  for (std::uint64_t label : {a, b, c}) {
    SeededRng step(h ^ (label * 0x9e37'79b9'7f4a'7c15ull));
    h = step.next();
  }
  return h;
}

std::string text_of(std::uint64_t seed, int tokens, double words_per_token) {
  const double words = std::max(1.0, std::round(static_cast<double>(tokens) * words_per_token));
  return make_text(seed, static_cast<std::size_t>(words));
}

int scaled(int tokens, double scale, int floor) {
  return std::max(floor, static_cast<int>(std::lround(static_cast<double>(tokens) * scale)));
}

double uniform01(SeededRng& rng) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; }

int draw_length(SeededRng& rng, const LogNormal& shape, double scale) {
  // Box–Muller; 1 - u keeps the logarithm's argument in (0, 1].
  const double u1 = 1.0 - uniform01(rng);
  const double u2 = uniform01(rng);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  const double tokens = shape.median * std::exp(shape.sigma * z);
  const int clipped = std::clamp(static_cast<int>(std::lround(tokens)), shape.lo, shape.hi);
  return scaled(clipped, scale, shape.lo);
}

}  // namespace prefixd::bench
