#include "api/tools/json_scan.h"

#include <cstring>

namespace prefixd::api {
namespace {

bool is_space(char c) { return is_json_space(c); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

JsonScanner JsonScanner::inside_object_after_comma() {
  JsonScanner scanner;
  scanner.containers_.push_back('{');
  scanner.expect_ = Expect::key;
  return scanner;
}

// A value (or key) just ended: what follows depends on the innermost container.
JsonScanner::Step JsonScanner::after_value() {
  token_ = Token::none;
  if (token_is_key_) {
    token_is_key_ = false;
    expect_ = Expect::colon;
    return Step::more;
  }
  if (containers_.empty()) {
    expect_ = Expect::done;
    return Step::complete;
  }
  expect_ = Expect::comma_or_close;
  return Step::more;
}

JsonScanner::Step JsonScanner::start_value(char c) {
  switch (c) {
    case '{':
      containers_.push_back('{');
      expect_ = Expect::key_or_close;
      return Step::more;
    case '[':
      containers_.push_back('[');
      expect_ = Expect::value_or_close;
      return Step::more;
    case '"':
      token_ = Token::string;
      return Step::more;
    case 't':
    case 'f':
    case 'n':
      token_ = Token::literal;
      literal_ = c == 't' ? "true" : c == 'f' ? "false" : "null";
      literal_matched_ = 1;
      return Step::more;
    default:
      if (c == '-' || is_digit(c)) {
        token_ = Token::number;
        num_ = c == '-' ? Num::minus : c == '0' ? Num::zero : Num::int_digits;
        return Step::more;
      }
      return Step::invalid;
  }
}

JsonScanner::Step JsonScanner::string_byte(char c) {
  if (hex_left_ > 0) {
    if (!is_hex(c)) return Step::invalid;
    --hex_left_;
    return Step::more;
  }
  if (escaped_) {
    escaped_ = false;
    if (c == 'u') {
      hex_left_ = 4;
      return Step::more;
    }
    return std::strchr("\"\\/bfnrt", c) != nullptr && c != '\0' ? Step::more : Step::invalid;
  }
  if (c == '\\') {
    escaped_ = true;
    return Step::more;
  }
  if (c == '"') return after_value();
  // Control characters must be escaped inside strings.
  return static_cast<unsigned char>(c) < 0x20 ? Step::invalid : Step::more;
}

JsonScanner::Step JsonScanner::number_byte(char c) {
  switch (num_) {
    case Num::minus:
      if (!is_digit(c)) return Step::invalid;
      num_ = c == '0' ? Num::zero : Num::int_digits;
      return Step::more;
    case Num::zero:
    case Num::int_digits:
      if (is_digit(c) && num_ == Num::int_digits) return Step::more;
      if (c == '.') {
        num_ = Num::dot;
        return Step::more;
      }
      if (c == 'e' || c == 'E') {
        num_ = Num::e;
        return Step::more;
      }
      break;
    case Num::dot:
      if (!is_digit(c)) return Step::invalid;
      num_ = Num::frac_digits;
      return Step::more;
    case Num::frac_digits:
      if (is_digit(c)) return Step::more;
      if (c == 'e' || c == 'E') {
        num_ = Num::e;
        return Step::more;
      }
      break;
    case Num::e:
      if (c == '+' || c == '-') {
        num_ = Num::e_sign;
        return Step::more;
      }
      [[fallthrough]];
    case Num::e_sign:
      if (!is_digit(c)) return Step::invalid;
      num_ = Num::exp_digits;
      return Step::more;
    case Num::exp_digits:
      if (is_digit(c)) return Step::more;
      break;
  }
  // The number ended before `c` (a leading zero followed by a digit lands here too, and is then
  // rejected as an unexpected byte after a value).
  const Step ended = after_value();
  if (ended == Step::complete) return Step::complete;
  return feed(c);
}

JsonScanner::Step JsonScanner::feed(char c) {
  switch (token_) {
    case Token::string:
      return string_byte(c);
    case Token::number:
      return number_byte(c);
    case Token::literal:
      if (literal_[literal_matched_] != c) return Step::invalid;
      ++literal_matched_;
      return literal_[literal_matched_] == '\0' ? after_value() : Step::more;
    case Token::none:
      break;
  }
  if (is_space(c)) return expect_ == Expect::done ? Step::invalid : Step::more;
  switch (expect_) {
    case Expect::value:
      return start_value(c);
    case Expect::value_or_close:
      if (c == ']') {
        containers_.pop_back();
        return after_value();
      }
      return start_value(c);
    case Expect::key_or_close:
      if (c == '}') {
        containers_.pop_back();
        return after_value();
      }
      [[fallthrough]];
    case Expect::key:
      if (c != '"') return Step::invalid;
      token_ = Token::string;
      token_is_key_ = true;
      return Step::more;
    case Expect::colon:
      if (c != ':') return Step::invalid;
      expect_ = Expect::value;
      return Step::more;
    case Expect::comma_or_close: {
      const char open = containers_.back();
      if (c == ',') {
        expect_ = open == '{' ? Expect::key : Expect::value;
        return Step::more;
      }
      if ((open == '{' && c == '}') || (open == '[' && c == ']')) {
        containers_.pop_back();
        return after_value();
      }
      return Step::invalid;
    }
    case Expect::done:
      return Step::invalid;
  }
  return Step::invalid;
}

}  // namespace prefixd::api
