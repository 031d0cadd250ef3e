// Deterministic, fast pseudo-random numbers for weight generation.
//
// std::normal_distribution is both slow (hundreds of millions of draws for the 0.5B preset) and
// not guaranteed to give the same numbers across standard libraries, which would break the
// "same seed => byte-identical file" promise. Everything here is plain integer arithmetic.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace prefixd::modelgen {

// Finalizer of splitmix64: a bijective avalanche mix of one 64-bit word.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a: a stable hash of a tensor name, so each tensor gets its own stream independent of
// the order tensors are generated in.
constexpr std::uint64_t fnv1a(std::string_view s) noexcept {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : s) {
    h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  }
  return h;
}

// Seed of one independent stream, derived from the user seed and up to two stream identifiers.
constexpr std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0) noexcept {
  return mix64(mix64(seed ^ 0x5EED5EED5EED5EEDull) ^ mix64(a + 0x9E3779B97F4A7C15ull) ^ (b * 0xD1B54A32D192ED03ull));
}

// xoshiro256**: small state, passes BigCrush, one multiply per draw.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept {
    // Expand the seed with splitmix64 so that nearby seeds still give unrelated states (and the
    // state is never all zero).
    for (auto& word : state_) {
      seed += 0x9E3779B97F4A7C15ull;
      word = mix64(seed);
    }
  }

  std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 24 bits of resolution (exact in float).
  float uniform() noexcept { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }

  // Uniform integer in [0, n); n > 0. The modulo bias (< n / 2^64) is irrelevant here.
  std::uint64_t below(std::uint64_t n) noexcept { return next() % n; }

  // Approximately standard normal: the Irwin-Hall sum of four 16-bit uniforms from one draw,
  // rescaled to unit variance. Tails are cut at about +-3.46 sigma, which is harmless (even
  // welcome) for random weights and keeps this to a single xoshiro step.
  float normal() noexcept {
    const std::uint64_t r = next();
    const auto lane = [r](int i) { return static_cast<std::int32_t>((r >> (16 * i)) & 0xFFFF); };
    const std::int32_t sum = lane(0) + lane(1) + lane(2) + lane(3);
    // mean of the sum: 4 * 65535 / 2; standard deviation: 65536 / sqrt(3) (to 1e-5 relative).
    constexpr float kCenter = 2.0f * 65535.0f;
    constexpr float kScale = 1.7320508f / 65536.0f;
    return (static_cast<float>(sum) - kCenter) * kScale;
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

  std::array<std::uint64_t, 4> state_{};
};

}  // namespace prefixd::modelgen
