#include "bench/prompts.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string_view>

namespace prefixd::bench {

std::uint64_t SeededRng::next() {
  state_ += 0x9e3779b97f4a7c15ull;
  std::uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t SeededRng::uniform(std::uint64_t lo, std::uint64_t hi) {
  if (hi <= lo) return lo;
  return lo + next() % (hi - lo);  // the modulo bias is irrelevant for prompt text
}

namespace {

constexpr std::array<std::string_view, 64> kWords = {
    "the",     "a",        "river",   "stone",    "quiet",    "engine",  "garden",  "light",
    "carries", "builds",   "over",    "under",    "morning",  "winter",  "market",  "signal",
    "copper",  "forest",   "slowly",  "bright",   "letter",   "harbor",  "measure", "planet",
    "history", "simple",   "window",  "travels",  "between",  "answer",  "number",  "silver",
    "mountain","library",  "follows", "careful",  "distant",  "village", "machine", "paper",
    "ocean",   "painted",  "reads",   "through",  "shadow",   "thunder", "gentle",  "circle",
    "question","kitchen",  "remembers","open",    "yellow",   "bridge",  "counts",  "evening",
    "animal",  "pattern",  "station", "quickly",  "northern", "castle",  "finds",   "music"};

}  // namespace

std::string make_text(std::uint64_t seed, std::size_t words) {
  SeededRng rng(seed);
  std::string text;
  std::size_t sentence_left = 0;
  for (std::size_t i = 0; i < words; ++i) {
    const bool starts_sentence = sentence_left == 0;
    if (starts_sentence) sentence_left = rng.uniform(6, 16);
    std::string word(kWords[rng.uniform(0, kWords.size())]);
    if (starts_sentence) word[0] = static_cast<char>(word[0] - 'a' + 'A');
    if (!text.empty()) text += ' ';
    text += word;
    if (--sentence_left == 0) text += '.';
  }
  return text;
}

std::size_t unique_prefix_tokens(const std::vector<TokenIds>& sequences) {
  // Sorting puts sequences with long common prefixes next to each other; each sequence then adds
  // the tokens past its longest common prefix with any other, which is its neighbour's.
  std::vector<const TokenIds*> sorted;
  for (const auto& s : sequences) sorted.push_back(&s);
  std::ranges::sort(sorted, [](const TokenIds* a, const TokenIds* b) { return *a < *b; });
  std::size_t total = 0;
  const TokenIds* previous = nullptr;
  for (const TokenIds* s : sorted) {
    std::size_t common = 0;
    if (previous != nullptr) {
      common = static_cast<std::size_t>(std::ranges::mismatch(*previous, *s).in2 - s->begin());
    }
    total += s->size() - common;
    previous = s;
  }
  return total;
}

std::vector<std::string> split_args(const std::string& text) {
  std::vector<std::string> out;
  std::string current;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        current += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(std::move(current));
      current.clear();
      in_word = false;
    } else {
      current += c;
      in_word = true;
    }
  }
  if (quote != 0) throw std::invalid_argument("unbalanced quote in: " + text);
  if (in_word) out.push_back(std::move(current));
  return out;
}

}  // namespace prefixd::bench
