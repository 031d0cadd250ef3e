// prefixd api — building GBNF grammars (llama.cpp's grammar format) rule by rule.
//
// Owns: rule names and bodies, the shared JSON primitives (bounded whitespace, strings, numbers,
// any JSON value) and integer ranges as digit patterns. Knows nothing about JSON Schema.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prefixd::api {

// The JSON primitives every grammar shares. Whitespace between tokens is at most one space or
// newline, so a model cannot run on whitespace forever; numbers have at most kMaxIntegerDigits
// integral and fraction digits and three exponent digits (every output is still valid JSON).
enum class JsonPrimitive { ws, character, string, integer, number, boolean, null, value, object, array };

inline constexpr int kMaxIntegerDigits = 16;

class GbnfBuilder {
 public:
  // Adds a rule and returns its name: `base` made a valid rule name, with a number appended when
  // the name is taken. A body equal to an existing rule's returns that rule instead.
  std::string add(std::string_view base, std::string body);
  // Reserves a name for a rule whose body refers to itself; define it before text().
  std::string reserve(std::string_view base);
  void define(const std::string& name, std::string body);
  // The name of a primitive's rule, added (with what it uses) on first use.
  std::string primitive(JsonPrimitive which);
  // Every rule, "root ::= root_body" first. REQUIRES: every reserved rule defined.
  std::string text(std::string_view root_body) const;

 private:
  std::string unique_name(std::string_view base);

  std::vector<std::pair<std::string, std::string>> rules_;  // in order of creation
  std::map<std::string, std::string> by_body_;              // body -> name, for sharing
  std::map<std::string, std::size_t> index_;                // name -> position in rules_
};

// A GBNF string literal matching exactly `text` (quotes, backslashes and control bytes escaped).
std::string gbnf_literal(std::string_view text);

// A GBNF expression for the decimal integers in [lo, hi] (JSON spelling: no leading zeros, "-" for
// negatives). Absent bounds stop at kMaxIntegerDigits digits. REQUIRES: lo <= hi when both are set.
std::string integer_range_gbnf(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi);

}  // namespace prefixd::api
