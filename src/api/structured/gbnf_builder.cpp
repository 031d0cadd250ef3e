#include "api/structured/gbnf_builder.h"

#include <algorithm>
#include <cctype>
#include <format>
#include <stdexcept>

namespace prefixd::api {
namespace {

constexpr std::int64_t kLargestInteger = 9'999'999'999'999'999;  // kMaxIntegerDigits nines

std::string rule_name(std::string_view base) {
  std::string out;
  for (char c : base) {
    const bool word = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (word) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    else if (!out.empty() && out.back() != '-') out.push_back('-');
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "rule" : out;
}

// Decimal strings of equal length, lo <= hi: the pattern of every string between them.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  if (lo == hi) return gbnf_literal(lo);
  if (lo.size() == 1) return std::format("[{}-{}]", lo[0], hi[0]);
  const std::string lo_rest = lo.substr(1);
  const std::string hi_rest = hi.substr(1);
  const std::string zeros(lo_rest.size(), '0');
  const std::string nines(lo_rest.size(), '9');
  const std::string any_tail = std::format("[0-9]{{{}}}", lo_rest.size());
  if (lo[0] == hi[0]) return gbnf_literal(lo.substr(0, 1)) + " " + same_length_range(lo_rest, hi_rest);
  if (lo_rest == zeros && hi_rest == nines) return std::format("[{}-{}] {}", lo[0], hi[0], any_tail);
  std::vector<std::string> alternatives;
  alternatives.push_back(gbnf_literal(lo.substr(0, 1)) + " (" + same_length_range(lo_rest, nines) + ")");
  if (lo[0] + 1 <= hi[0] - 1) alternatives.push_back(std::format("[{}-{}] {}", char(lo[0] + 1), char(hi[0] - 1), any_tail));
  alternatives.push_back(gbnf_literal(hi.substr(0, 1)) + " (" + same_length_range(zeros, hi_rest) + ")");
  std::string out;
  for (const std::string& a : alternatives) out += (out.empty() ? "" : " | ") + a;
  return "(" + out + ")";
}

// Non-negative integers in [lo, hi], split by digit count.
std::vector<std::string> non_negative_range(std::int64_t lo, std::int64_t hi) {
  std::vector<std::string> out;
  std::int64_t low_of_length = 0;
  std::int64_t high_of_length = 9;
  for (int digits = 1; digits <= kMaxIntegerDigits && low_of_length <= hi; ++digits) {
    const std::int64_t a = std::max(lo, low_of_length);
    const std::int64_t b = std::min(hi, high_of_length);
    if (a <= b) out.push_back("(" + same_length_range(std::to_string(a), std::to_string(b)) + ")");
    low_of_length = high_of_length + 1;
    high_of_length = high_of_length * 10 + 9;
  }
  return out;
}

}  // namespace

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      out += std::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "\"";
}

std::string integer_range_gbnf(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
  const std::int64_t low = std::max(lo.value_or(-kLargestInteger), -kLargestInteger);
  const std::int64_t high = std::min(hi.value_or(kLargestInteger), kLargestInteger);
  if (low > high) throw std::logic_error("integer_range_gbnf: empty range");
  std::vector<std::string> alternatives;
  if (high >= 0) alternatives = non_negative_range(std::max<std::int64_t>(low, 0), high);
  if (low < 0) {
    const std::int64_t magnitude_low = high < 0 ? -high : 1;
    for (const std::string& part : non_negative_range(magnitude_low, -low)) alternatives.push_back("\"-\" " + part);
  }
  std::string out;
  for (const std::string& a : alternatives) out += (out.empty() ? "" : " | ") + a;
  return "(" + out + ")";
}

std::string GbnfBuilder::unique_name(std::string_view base) {
  std::string stem = rule_name(base);
  // No number makes these free: "json-*" names stay taken whatever follows.
  if (stem.starts_with("json-")) stem = "rule-" + stem;
  std::string name = stem;
  // "root", "ws" and "json-*" belong to the grammar's root and the primitives.
  auto taken = [this](const std::string& n) { return index_.contains(n) || n == "root" || n == "ws" || n.starts_with("json-"); };
  if (!taken(name)) return name;
  // Numbers already handed out for this stem are never tried again: a grammar with thousands of
  // rules from one stem (a large enum) is built in linear time.
  int& next = next_suffix_.try_emplace(stem, 2).first->second;
  do {
    name = std::format("{}-{}", stem, next++);
  } while (taken(name));
  return name;
}

std::string GbnfBuilder::add(std::string_view base, std::string body) {
  if (auto found = by_body_.find(body); found != by_body_.end()) return found->second;
  const std::string name = unique_name(base);
  index_[name] = rules_.size();
  rules_.emplace_back(name, body);
  by_body_.emplace(std::move(body), name);
  return name;
}

std::string GbnfBuilder::reserve(std::string_view base) {
  const std::string name = unique_name(base);
  index_[name] = rules_.size();
  rules_.emplace_back(name, std::string());
  return name;
}

void GbnfBuilder::define(const std::string& name, std::string body) { rules_.at(index_.at(name)).second = std::move(body); }

std::string GbnfBuilder::primitive(JsonPrimitive which) {
  // Fixed names, which unique_name never hands out.
  auto fixed = [this](const std::string& name, const std::string& body) {
    if (!index_.contains(name)) {
      index_[name] = rules_.size();
      rules_.emplace_back(name, body);
    }
    return name;
  };
  switch (which) {
    case JsonPrimitive::ws: return fixed("ws", R"([ \n]?)");
    case JsonPrimitive::character:
      // A \u escape names a code point outside the surrogates, or a high and a low surrogate in a
      // pair: strict parsers (nlohmann's, among them) refuse a lone surrogate, which the plain
      // JSON grammar would allow.
      fixed("json-code-unit",
            R"(([0-9a-cA-C] | [eEfF]) [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2})");
      return fixed("json-char", R"([^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" json-code-unit))");
    case JsonPrimitive::string: return fixed("json-string", "\"\\\"\" " + primitive(JsonPrimitive::character) + "* \"\\\"\"");
    case JsonPrimitive::integer: return fixed("json-integer", std::format(R"("-"? ("0" | [1-9] [0-9]{{0,{}}}))", kMaxIntegerDigits - 1));
    case JsonPrimitive::number:
      return fixed("json-number", primitive(JsonPrimitive::integer) +
                                      std::format(R"( ("." [0-9]{{1,{}}})? ([eE] [-+]? [0-9]{{1,3}})?)", kMaxIntegerDigits));
    case JsonPrimitive::boolean: return fixed("json-boolean", R"("true" | "false")");
    case JsonPrimitive::null: return fixed("json-null", R"("null")");
    case JsonPrimitive::value:
      if (!index_.contains("json-value")) {
        fixed("json-value", "json-object | json-array | json-string | json-number | json-boolean | json-null");
        for (auto p : {JsonPrimitive::object, JsonPrimitive::array, JsonPrimitive::string, JsonPrimitive::number,
                       JsonPrimitive::boolean, JsonPrimitive::null}) {
          primitive(p);
        }
      }
      return "json-value";
    case JsonPrimitive::object: {
      const std::string ws = primitive(JsonPrimitive::ws);
      fixed("json-object", "\"{\" ws ( json-member ( ws \",\" ws json-member )* ws )? \"}\"");
      fixed("json-member", primitive(JsonPrimitive::string) + " ws \":\" ws " + primitive(JsonPrimitive::value));
      return "json-object";
    }
    case JsonPrimitive::array:
      primitive(JsonPrimitive::ws);
      fixed("json-array", "\"[\" ws ( json-value ( ws \",\" ws json-value )* ws )? \"]\"");
      primitive(JsonPrimitive::value);
      return "json-array";
  }
  throw std::logic_error("GbnfBuilder::primitive: unknown primitive");
}

std::string GbnfBuilder::text(std::string_view root_body) const {
  std::string out = std::format("root ::= {}\n", root_body);
  for (const auto& [name, body] : rules_) {
    if (body.empty()) throw std::logic_error("GbnfBuilder::text: rule '" + name + "' reserved but never defined");
    out += std::format("{} ::= {}\n", name, body);
  }
  return out;
}

}  // namespace prefixd::api
