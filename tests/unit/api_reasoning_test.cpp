// A reply's reasoning apart from its answer, whole and as it streams in pieces of any size.
#include <gtest/gtest.h>

#include <string>

#include "api/reasoning/reasoning.h"

namespace prefixd::api {
namespace {

const ReasoningSyntax kThink;

// Fed one piece of `size` bytes at a time, then finished.
SplitReply streamed(const std::string& text, bool starts_inside, std::size_t size) {
  ReasoningSplitter splitter(kThink, starts_inside);
  SplitReply out;
  for (std::size_t at = 0; at < text.size(); at += size) {
    const SplitReply piece = splitter.feed(std::string_view(text).substr(at, size));
    out.reasoning += piece.reasoning;
    out.content += piece.content;
  }
  const SplitReply rest = splitter.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

TEST(Reasoning, TemplatesThatWriteTheMarkerReasonAndAnOpenBlockInThePromptStartsTheReplyInside) {
  EXPECT_FALSE(reasoning_syntax("{{ '<|im_start|>assistant\\n' }}").has_value());
  EXPECT_TRUE(reasoning_syntax("{%- if enable_thinking %}{{ '<think>\\n' }}{%- endif %}").has_value());
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", kThink));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", kThink)) << "thinking off";
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n", kThink));
  EXPECT_TRUE(prompt_opens_reasoning("<think>a</think> b <think>", kThink));
}

TEST(Reasoning, EveryPieceSizeSplitsAlike) {
  struct Case {
    std::string text;
    bool inside;
    std::string reasoning, content;
  };
  const Case cases[] = {
      {"<think>Check the units.</think>\n\nIt is 9 C.", false, "Check the units.", "It is 9 C."},
      {"  <think>x</think>y", false, "x", "y"},
      {"Check the units.</think>\nIt is 9 C.", true, "Check the units.", "It is 9 C."},
      {"No reasoning here, <think> is text.", false, "", "No reasoning here, <think> is text."},
      {"never closed <th", true, "never closed <th", ""},
      {"<thin", false, "", "<thin"},
      {"<think>a</thinking> b</think>", false, "a</thinking> b", ""},
      {"</think>answer", true, "", "answer"},
      {"", true, "", ""},
  };
  for (const Case& c : cases) {
    const SplitReply whole = split_reasoning(c.text, kThink, c.inside);
    EXPECT_EQ(whole.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(whole.content, c.content) << c.text;
    for (std::size_t size = 1; size <= c.text.size(); ++size) {
      const SplitReply pieces = streamed(c.text, c.inside, size);
      ASSERT_EQ(pieces.reasoning, c.reasoning) << c.text << " in pieces of " << size;
      ASSERT_EQ(pieces.content, c.content) << c.text << " in pieces of " << size;
    }
  }
}

TEST(Reasoning, APartialMarkerIsHeldBackUntilItIsDecided) {
  ReasoningSplitter splitter(kThink, /*starts_inside=*/true);
  EXPECT_EQ(splitter.feed("thinking </th").reasoning, "thinking ");
  EXPECT_TRUE(splitter.in_reasoning());
  const SplitReply closed = splitter.feed("ink>\n\nDone");
  EXPECT_EQ(closed.reasoning, "");
  EXPECT_EQ(closed.content, "Done");
  EXPECT_FALSE(splitter.in_reasoning());
}

}  // namespace
}  // namespace prefixd::api
