#include "api/reasoning/reasoning.h"

#include <algorithm>
#include <utility>

namespace prefixd::api {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The length of the longest suffix of `text` that is a proper prefix of `marker`: text that may
// become the marker once more arrives.
std::size_t partial_marker(std::string_view text, std::string_view marker) {
  for (std::size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

std::optional<ReasoningSyntax> reasoning_syntax(std::string_view template_source) {
  ReasoningSyntax syntax;
  if (template_source.find(syntax.open) == std::string_view::npos) return std::nullopt;
  return syntax;
}

bool prompt_opens_reasoning(std::string_view prompt_text, const ReasoningSyntax& syntax) {
  const std::size_t open = prompt_text.rfind(syntax.open);
  if (open == std::string_view::npos) return false;
  const std::size_t close = prompt_text.rfind(syntax.close);
  return close == std::string_view::npos || close < open;
}

ReasoningSplitter::ReasoningSplitter(ReasoningSyntax syntax, bool starts_inside)
    : syntax_(std::move(syntax)), state_(starts_inside ? State::reasoning : State::start) {}

SplitReply ReasoningSplitter::feed(std::string_view text) {
  pending_ += text;
  SplitReply out;
  step(out, /*last=*/false);
  return out;
}

SplitReply ReasoningSplitter::finish() {
  SplitReply out;
  step(out, /*last=*/true);
  return out;
}

void ReasoningSplitter::step(SplitReply& out, bool last) {
  for (;;) {
    switch (state_) {
      case State::start: {
        // Leading whitespace, then the open marker or the answer.
        const std::size_t first = std::ranges::find_if_not(pending_, is_space) - pending_.begin();
        const std::string_view rest = std::string_view(pending_).substr(first);
        if (rest.starts_with(syntax_.open)) {
          pending_.erase(0, first + syntax_.open.size());
          state_ = State::reasoning;
          continue;
        }
        if (!last && std::string_view(syntax_.open).starts_with(rest)) return;  // may still become it
        state_ = State::content;
        continue;
      }
      case State::reasoning: {
        const std::size_t close = pending_.find(syntax_.close);
        if (close != std::string::npos) {
          out.reasoning += pending_.substr(0, close);
          pending_.erase(0, close + syntax_.close.size());
          state_ = State::after_close;
          continue;
        }
        const std::size_t hold = last ? 0 : partial_marker(pending_, syntax_.close);
        out.reasoning += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      case State::after_close: {
        const auto first = std::ranges::find_if_not(pending_, is_space) - pending_.begin();
        pending_.erase(0, static_cast<std::size_t>(first));
        if (pending_.empty()) return;
        state_ = State::content;
        continue;
      }
      case State::content:
        out.content += pending_;
        pending_.clear();
        return;
    }
  }
}

SplitReply split_whole(ReasoningSplitter splitter, std::string_view text) {
  SplitReply out = splitter.feed(text);
  SplitReply rest = splitter.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

}  // namespace prefixd::api
