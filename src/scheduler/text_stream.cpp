#include "scheduler/text_stream.h"

#include <algorithm>

namespace prefixd::scheduler {
namespace {

// Expected length of a UTF-8 sequence from its lead byte; 0 for a continuation or invalid byte.
std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return lead >= 0xC2 ? 2 : 0;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return lead <= 0xF4 ? 4 : 0;
  return 0;
}

}  // namespace

std::size_t complete_utf8_prefix(std::string_view text) {
  // Look back at most 3 bytes for the lead byte of a trailing, unfinished sequence.
  const std::size_t n = text.size();
  for (std::size_t back = 1; back <= std::min<std::size_t>(3, n); ++back) {
    const auto byte = static_cast<unsigned char>(text[n - back]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const std::size_t need = sequence_length(byte);
    return (need > back) ? n - back : n;
  }
  return n;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t need = sequence_length(lead);
    bool valid = need > 0 && i + need <= text.size();
    for (std::size_t k = 1; valid && k < need; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    if (valid) {
      out.append(text.substr(i, need));
      i += need;
    } else {
      out.append("\xEF\xBF\xBD");
      ++i;
    }
  }
  return out;
}

TextStream::TextStream(std::vector<std::string> stop, std::int32_t indent_floor)
    : stop_(std::move(stop)), indent_floor_(std::max<std::int32_t>(indent_floor, 0)) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
}

std::size_t TextStream::indent_cut() {
  if (indent_floor_ == 0) return std::string::npos;
  for (; scanned_ < pending_.size(); ++scanned_) {
    const char c = pending_[scanned_];
    if (c == '\n') {
      line_indent_ = 0;
    } else if (line_indent_ < 0) {
      continue;  // before the first newline, or past the current line's first non-blank
    } else if (c == ' ' || c == '\t') {
      line_indent_ += 1;
    } else if (line_indent_ < indent_floor_) {
      return scanned_;
    } else {
      line_indent_ = -1;
    }
  }
  return std::string::npos;
}

std::string TextStream::append(std::string_view piece) {
  if (stopped_) return {};
  pending_.append(piece);
  // A stop string ends the text right before it; a line below the indent floor before its first
  // non-blank character.
  std::size_t cut = indent_cut();
  const std::string* matched = nullptr;
  for (const std::string& s : stop_) {
    if (const std::size_t at = pending_.find(s); at < cut) {
      cut = at;
      matched = &s;
    }
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    if (matched != nullptr) matched_stop_ = *matched;
    std::string out = sanitize_utf8(std::string_view(pending_).substr(0, cut));
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  std::size_t hold = 0;
  for (const std::string& s : stop_) {
    for (std::size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  const std::size_t safe = complete_utf8_prefix(std::string_view(pending_).substr(0, pending_.size() - hold));
  std::string out = sanitize_utf8(std::string_view(pending_).substr(0, safe));
  pending_.erase(0, safe);
  scanned_ -= std::min(scanned_, safe);
  return out;
}

std::string TextStream::finish() {
  std::string out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace prefixd::scheduler
