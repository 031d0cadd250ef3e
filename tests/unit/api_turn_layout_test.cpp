// Turn boundaries of a chat prompt, and the memo that spares a conversation's next request the
// render and tokenization of every history it has sent before.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/prompt/chat_template.h"
#include "api/prompt/turn_layout.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

// One token per byte: a tokenization whose prefixes are the prefixes' tokenizations. Counts the
// histories it tokenizes (add_special), not the continuation after a reply.
struct ByteTokenizer {
  int histories = 0;
  RenderedTokenizer function() {
    return [this](std::string_view text, bool add_special) {
      if (add_special) ++histories;
      return std::vector<engine::Token>(text.begin(), text.end());
    };
  }
};

ChatInput conversation(int user_turns) {
  ChatInput input;
  input.messages.push_back({{"role", "system"}, {"content", "You keep the library's catalogue."}});
  for (int t = 0; t < user_turns; ++t) {
    if (t > 0) input.messages.push_back({{"role", "assistant"}, {"content", "Answer " + std::to_string(t)}});
    input.messages.push_back({{"role", "user"}, {"content", "Question " + std::to_string(t)}});
  }
  return input;
}

struct Rendered {
  std::string text;
  std::vector<engine::Token> tokens;
};

Rendered render(const ChatTemplate& chat_template, const ChatInput& input) {
  const auto text = chat_template.render(input);
  EXPECT_TRUE(text.has_value());
  return {*text, std::vector<engine::Token>(text->begin(), text->end())};
}

TEST(TurnLayout, TheMemoGivesTheSameBoundariesWithoutTokenizingKnownHistories) {
  const auto chat_template = ChatTemplate::create(std::string(chatml_template_source()));
  ASSERT_TRUE(chat_template.has_value());
  HistoryMemo memo;
  const ChatInput first = conversation(3);
  const Rendered first_prompt = render(*chat_template, first);
  ByteTokenizer plain;
  const TurnLayout expected = turn_layout(*chat_template, plain.function(), first, first_prompt.text, first_prompt.tokens);
  ASSERT_EQ(expected.boundaries.size(), 3u);
  ByteTokenizer remembering;
  EXPECT_EQ(turn_layout(*chat_template, remembering.function(), first, first_prompt.text, first_prompt.tokens, 8, &memo).boundaries,
            expected.boundaries);
  EXPECT_EQ(remembering.histories, 3);
  // The next turn: its first three histories are known, only the newest is tokenized.
  const ChatInput next = conversation(4);
  const Rendered next_prompt = render(*chat_template, next);
  ByteTokenizer again;
  const TurnLayout with_memo = turn_layout(*chat_template, again.function(), next, next_prompt.text, next_prompt.tokens, 8, &memo);
  EXPECT_EQ(again.histories, 1);
  ByteTokenizer fresh;
  EXPECT_EQ(with_memo.boundaries, turn_layout(*chat_template, fresh.function(), next, next_prompt.text, next_prompt.tokens).boundaries);
  EXPECT_EQ(with_memo.boundaries.size(), 4u);
}

TEST(TurnLayout, ARememberedHistoryThatIsNotThePromptsOwnGivesNoBoundary) {
  const auto chat_template = ChatTemplate::create(std::string(chatml_template_source()));
  ASSERT_TRUE(chat_template.has_value());
  HistoryMemo memo;
  const ChatInput input = conversation(2);
  Rendered prompt = render(*chat_template, input);
  ByteTokenizer tokenizer;
  const TurnLayout layout = turn_layout(*chat_template, tokenizer.function(), input, prompt.text, prompt.tokens, 8, &memo);
  ASSERT_EQ(layout.boundaries.size(), 2u);
  // The same messages, tokenized otherwise (another request's literal text): the remembered tokens
  // are not this prompt's, so no boundary is taken from them.
  std::vector<engine::Token> other = prompt.tokens;
  other[1] += 1;
  ByteTokenizer unused;
  EXPECT_TRUE(turn_layout(*chat_template, unused.function(), input, prompt.text, other, 8, &memo).boundaries.empty());
  EXPECT_EQ(unused.histories, 0) << "both histories were known";
}

TEST(TurnLayout, TheMemoForgetsItsLeastRecentlyUsedHistory) {
  HistoryMemo memo(2);
  memo.remember(1, {10, 100});
  memo.remember(2, {20, 200});
  ASSERT_TRUE(memo.find(1).has_value());  // 2 is now the least recently used
  memo.remember(3, {30, 300});
  EXPECT_TRUE(memo.find(1).has_value());
  EXPECT_FALSE(memo.find(2).has_value());
  EXPECT_EQ(memo.find(3)->tokens, 30u);
}

}  // namespace
}  // namespace prefixd::api
