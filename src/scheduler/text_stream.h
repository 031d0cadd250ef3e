// prefixd scheduler — turns sampled token pieces into client-visible text.
//
// Holds back what cannot be sent yet: an incomplete UTF-8 sequence at the end, and any suffix that
// could still grow into a stop string. Invariant: the concatenation of everything take() returned
// plus finish() is the generated text up to (not including) the first stop string, as valid UTF-8.
//
// With an indent floor (llama.cpp's n_indent), the text also ends at the first line after the
// first newline whose first non-blank character sits left of the floor: the line's leading spaces
// and tabs are kept, the rest is not. An editor asking for a completion at a given indent wants
// the block that starts there, not the code after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prefixd::scheduler {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop, std::int32_t indent_floor = 0);

  // Appends one token's bytes; returns the text that is now safe to send (possibly empty).
  std::string append(std::string_view piece);
  // True once a stop string or a line below the indent floor was seen; nothing more is ever sent
  // after it.
  bool stopped() const { return stopped_; }
  // True when the indent floor, not a stop string, ended the text.
  bool ended_by_indent() const { return stopped_ && matched_stop_.empty(); }
  // The stop string that ended the text (the earliest in the text; of two at one place, the one
  // listed first); empty while none has.
  const std::string& matched_stop() const { return matched_stop_; }
  // Everything still held back (at the end of generation), invalid UTF-8 replaced by U+FFFD.
  std::string finish();

 private:
  // Where the indent floor ends `pending_` (npos: not there); updates the line tracking below.
  std::size_t indent_cut();

  std::vector<std::string> stop_;
  std::int32_t indent_floor_ = 0;
  std::string pending_;  // text generated but not yet sent
  std::size_t scanned_ = 0;  // bytes of pending_ the indent tracking has seen
  std::int32_t line_indent_ = -1;  // blanks so far at the start of the current line; -1: none to measure
                                   // (the first line, or a line whose indent was already measured)
  bool stopped_ = false;
  std::string matched_stop_;
};

// Replaces invalid UTF-8 sequences with U+FFFD.
std::string sanitize_utf8(std::string_view text);
// Length of the longest prefix of `text` that does not end inside an incomplete UTF-8 sequence.
std::size_t complete_utf8_prefix(std::string_view text);

}  // namespace prefixd::scheduler
