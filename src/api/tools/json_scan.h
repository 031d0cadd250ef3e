// prefixd api — an incremental JSON syntax checker, one byte at a time.
//
// The tool-call parsers (tool_call_stream.h) must know, while a model is still writing a call's
// arguments, whether the bytes so far can still become valid JSON and when the value is complete,
// without waiting for the end of the output. JsonScanner answers both for one value, in strict
// RFC 8259 syntax (no comments, no trailing commas, no NaN, only the seven escapes and \uXXXX).
// It checks syntax only: it keeps no values and does not validate UTF-8 (that is the text's job).
#pragma once

#include <cstdint>
#include <vector>

namespace prefixd::api {

// JSON's four whitespace bytes.
inline bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class JsonScanner {
 public:
  enum class Step { more, complete, invalid };

  // Checks the next byte. `more`: the bytes so far are a prefix of some valid value; `complete`:
  // this byte ended the value; `invalid`: no valid value starts with these bytes (the byte is
  // rejected). A top-level number ends only at the next byte, which is then reported `complete`
  // though it is not part of the value: callers here only scan objects, whose end is a '}'.
  // REQUIRES: not called again after `complete` or `invalid`.
  Step feed(char c);

  // Starts in the middle of an object, just after a ',' between members: the scanner then
  // expects a key and completes at the object's closing '}'.
  static JsonScanner inside_object_after_comma();

 private:
  enum class Expect : std::uint8_t {
    value,           // a value (top level, after ':' or after ',' in an array)
    value_or_close,  // just after '[': a value or ']'
    key,             // after ',' in an object
    key_or_close,    // just after '{': a key or '}'
    colon,           // after a key
    comma_or_close,  // after a member or element
    done,
  };
  enum class Token : std::uint8_t { none, string, number, literal };

  Step after_value();
  Step start_value(char c);
  Step string_byte(char c);
  Step number_byte(char c);

  std::vector<char> containers_;  // '{' or '[' for each open container, innermost last
  Expect expect_ = Expect::value;
  Token token_ = Token::none;
  bool token_is_key_ = false;
  // String state: after a backslash; hex digits still expected in a \uXXXX escape.
  bool escaped_ = false;
  int hex_left_ = 0;
  // Number state: which part of -int.frac e+exp the last byte was in.
  enum class Num : std::uint8_t { minus, zero, int_digits, dot, frac_digits, e, e_sign, exp_digits };
  Num num_ = Num::minus;
  // Literal state: the literal being matched and how many of its bytes matched.
  const char* literal_ = nullptr;
  int literal_matched_ = 0;
};

}  // namespace prefixd::api
