// prefixd bench — deterministic prompts: the same seed gives the same prompt on every run and
// machine (a hand-rolled generator, since std:: distributions differ between standard libraries).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace prefixd::bench {

using TokenIds = std::vector<std::int32_t>;

// SplitMix64: tiny, fast and fully specified, so prompts are reproducible across platforms.
class SeededRng {
 public:
  explicit SeededRng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [lo, hi); lo when the range is empty.
  std::uint64_t uniform(std::uint64_t lo, std::uint64_t hi);

 private:
  std::uint64_t state_;
};

// The first `words` words of an endless, seed-determined stream of English-looking sentences.
// A prefix of a longer text with the same seed, so growing `words` only appends.
std::string make_text(std::uint64_t seed, std::size_t words);

// Distinct token positions when the sequences share common prefixes (the node count of their
// trie): what a perfectly deduplicating prefix cache would have to keep.
std::size_t unique_prefix_tokens(const std::vector<TokenIds>& sequences);

// Splits a command-line fragment on whitespace; single and double quotes group words.
std::vector<std::string> split_args(const std::string& text);

}  // namespace prefixd::bench
