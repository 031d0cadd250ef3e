// prefixd scheduler — turns sampled token pieces into client-visible text.
//
// Holds back what cannot be sent yet: an incomplete UTF-8 sequence at the end, and any suffix that
// could still grow into a stop string. Invariant: the concatenation of everything take() returned
// plus finish() is the generated text up to (not including) the first stop string, as valid UTF-8.
#pragma once

#include <string>
#include <vector>

namespace prefixd::scheduler {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop);

  // Appends one token's bytes; returns the text that is now safe to send (possibly empty).
  std::string append(std::string_view piece);
  // True once a stop string was seen; nothing more is ever sent after it.
  bool stopped() const { return stopped_; }
  // The stop string that ended the text (the earliest in the text; of two at one place, the one
  // listed first); empty while none has.
  const std::string& matched_stop() const { return matched_stop_; }
  // Everything still held back (at the end of generation), invalid UTF-8 replaced by U+FFFD.
  std::string finish();

 private:
  std::vector<std::string> stop_;
  std::string pending_;  // text generated but not yet sent
  bool stopped_ = false;
  std::string matched_stop_;
};

// Replaces invalid UTF-8 sequences with U+FFFD.
std::string sanitize_utf8(std::string_view text);
// Length of the longest prefix of `text` that does not end inside an incomplete UTF-8 sequence.
std::size_t complete_utf8_prefix(std::string_view text);

}  // namespace prefixd::scheduler
