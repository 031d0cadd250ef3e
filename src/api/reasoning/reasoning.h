// prefixd api — a reply's reasoning, apart from its answer.
//
// Templates of reasoning models have the model think between markers before it answers
// (`<think>` … `</think>`), and most open the block themselves at the end of the generation
// prompt when thinking is on. The text inside is the reply's reasoning: OpenAI-style clients read
// it as `reasoning_content`, Anthropic's as a `thinking` block, the Responses API as a
// `reasoning` item; the answer after it is what tool-call parsing and the content see.
// A template is taken to reason when its source writes the open marker. A reply is in reasoning
// from its first token when the rendered prompt ends inside an open block (the template opened
// it), or when the reply itself begins with the open marker; a marker later in the answer is
// text. A reply that never closes its block is all reasoning.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace prefixd::api {

struct ReasoningSyntax {
  std::string open = "<think>";
  std::string close = "</think>";
};

// The syntax a chat template teaches, or nullopt when it does not reason.
std::optional<ReasoningSyntax> reasoning_syntax(std::string_view template_source);

// Whether the rendered prompt leaves the reply inside a reasoning block (its last open marker
// comes after its last close marker).
bool prompt_opens_reasoning(std::string_view prompt_text, const ReasoningSyntax& syntax);

struct SplitReply {
  std::string reasoning;
  std::string content;
};

// Splits a reply as it arrives: each feed() returns the reasoning and content that are certain
// so far (a piece that could be the start of a marker is held back until the next piece or
// finish()). Whitespace between the close marker and the answer is dropped, as templates render
// it again when the reply returns in a later turn.
class ReasoningSplitter {
 public:
  ReasoningSplitter(ReasoningSyntax syntax, bool starts_inside);
  SplitReply feed(std::string_view text);
  SplitReply finish();
  bool in_reasoning() const { return state_ == State::reasoning; }

 private:
  enum class State { start, reasoning, after_close, content };
  void step(SplitReply& out, bool last);

  ReasoningSyntax syntax_;
  State state_;
  std::string pending_;
};

// The whole reply at once, by a splitter that has seen nothing yet.
SplitReply split_whole(ReasoningSplitter splitter, std::string_view text);
inline SplitReply split_reasoning(std::string_view text, const ReasoningSyntax& syntax, bool starts_inside) {
  return split_whole(ReasoningSplitter(syntax, starts_inside), text);
}

}  // namespace prefixd::api
