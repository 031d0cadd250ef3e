// prefixd api — building GBNF grammars (llama.cpp's grammar format) rule by rule.
//
// Owns: rule names and bodies, the shared JSON primitives (bounded whitespace, strings, numbers,
// any JSON value) and integer ranges as digit patterns. Knows nothing about JSON Schema.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace prefixd::api {

// The JSON primitives every grammar shares. Whitespace between tokens is at most one space or
// newline, so a model cannot run on whitespace forever; numbers have at most kMaxIntegerDigits
// integral and fraction digits and three exponent digits (every output is still valid JSON).
enum class JsonPrimitive { ws, character, string, integer, number, boolean, null, value, object, array };

inline constexpr int kMaxIntegerDigits = 16;

// The grammar engine expands a repetition x{m,n} into about n rules and refuses one of 2,000 or
// more; counts above kRepetitionChunk are therefore written as repetitions of chunks of
// kRepetitionChunk, which keeps every count small and the rules near the count's square root.
// kMaxRepetition bounds what a schema may ask for (no context holds that much output).
inline constexpr std::int64_t kRepetitionChunk = 1000;
inline constexpr std::int64_t kMaxRepetition = 1'000'000;

class GbnfBuilder {
 public:
  // Adds a rule and returns its name: `base` made a valid rule name, with a number appended when
  // the name is taken. A body equal to an existing rule's returns that rule instead.
  std::string add(std::string_view base, std::string body);
  // Reserves a name for a rule whose body refers to itself; define it before text().
  std::string reserve(std::string_view base);
  void define(const std::string& name, std::string body);
  // A GBNF expression for `element` (a rule name) repeated between min and max times (max nullopt:
  // no bound). REQUIRES: 0 <= min <= max <= kMaxRepetition.
  std::string repeat(const std::string& element, std::int64_t min, std::optional<std::int64_t> max);
  // A GBNF expression matching exactly one of `texts` (distinct, at least one), spelled as a trie of
  // their characters: the grammar engine follows one stack per alternative it could be in, and
  // pays for each stack on every vocabulary token it masks, so N flat alternatives cost N stacks
  // where the trie costs only the distinct next characters (at most the alphabet), whatever N.
  std::string one_of_literals(std::string_view base, std::span<const std::string> texts);
  // The rules the grammar engine will hold: the rules here plus those its repetitions expand to.
  std::int64_t engine_rules() const { return static_cast<std::int64_t>(rules_.size()) + repetition_rules_; }
  // The name of a primitive's rule, added (with what it uses) on first use.
  std::string primitive(JsonPrimitive which);
  // Every rule, "root ::= root_body" first. REQUIRES: every reserved rule defined.
  std::string text(std::string_view root_body) const;

 private:
  std::string unique_name(std::string_view base);

  std::vector<std::pair<std::string, std::string>> rules_;  // in order of creation
  std::map<std::string, std::string> by_body_;              // body -> name, for sharing
  std::map<std::string, std::size_t> index_;                // name -> position in rules_
  std::map<std::string, int> next_suffix_;                   // stem -> the next number to try
  std::int64_t repetition_rules_ = 0;                        // rules the engine adds for repetitions
};

// A GBNF string literal matching exactly `text` (quotes, backslashes and control bytes escaped).
std::string gbnf_literal(std::string_view text);

// A GBNF expression for the decimal integers in [lo, hi] (JSON spelling: no leading zeros, "-" for
// negatives). Absent bounds stop at kMaxIntegerDigits digits. REQUIRES: lo <= hi when both are set.
std::string integer_range_gbnf(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi);

}  // namespace prefixd::api
