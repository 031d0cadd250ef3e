// Reading a request body's prompt length without parsing it: the weights match what the parser
// would see, duplicate keys resolve as the parser resolves them, and anything the scan cannot
// follow is left to the parser.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/body/body_scan.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

std::vector<MessageWeight> messages_of(const std::string& body) {
  const auto scanned = scan_chat_messages(body);
  EXPECT_TRUE(scanned.has_value()) << body;
  return scanned.value_or(std::vector<MessageWeight>{});
}

TEST(ApiBodyScan, WeighsEachMessageAsTheParserDecodesIt) {
  const json body = {{"model", "m"},
                     {"messages", json::array({{{"role", "system"}, {"content", "Be  brief.\n"}},
                                               {{"content", "caf\u00e9 \U0001F600"}, {"role", "user"}},
                                               {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array()}}})},
                     {"max_tokens", 3}};
  // dump() escapes nothing but quotes and control characters; ensure_ascii escapes every
  // non-ASCII character, surrogate pairs included: both must weigh the same.
  for (const std::string& text : {body.dump(), body.dump(2, ' ', /*ensure_ascii=*/true)}) {
    const auto messages = messages_of(text);
    ASSERT_EQ(messages.size(), 3u);
    EXPECT_EQ(messages[0].role, "system");
    EXPECT_EQ(messages[0].content.bytes, 11u);
    EXPECT_EQ(messages[0].content.non_space_bytes, 8u);
    EXPECT_EQ(messages[1].role, "user");
    EXPECT_EQ(messages[1].content.bytes, std::string("caf\u00e9 \U0001F600").size());
    EXPECT_EQ(messages[1].content.non_space_bytes, messages[1].content.bytes - 1);
    EXPECT_EQ(messages[2].role, "assistant");
    EXPECT_EQ(messages[2].content.bytes, 0u);
  }
}

TEST(ApiBodyScan, LongTextsWeighExactlyWhateverTheirBytesAndAlignment) {
  // Spaces, other whitespace (escaped in JSON), quotes, backslashes, control bytes and multi-byte
  // characters at every offset, against the parser's own decoding.
  const std::vector<std::string> pieces = {"a", " ", "  ", "\t", "\n", "\"", "\\", "\u0001", "\u00e9", "\xe6\x9d\xb1",
                                           "\xf0\x9f\x98\x80", "word", "        ", "0123456789abcdef"};
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    std::string text;
    const int length = static_cast<int>(rng() % 300);
    for (int i = 0; i < length; ++i) text += pieces[rng() % pieces.size()];
    const std::string body = json({{"messages", json::array({{{"role", "user"}, {"content", text}}})}}).dump();
    const auto messages = messages_of(body);
    ASSERT_EQ(messages.size(), 1u);
    const auto spaces = std::ranges::count_if(text, [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
    EXPECT_EQ(messages[0].content.bytes, text.size());
    EXPECT_EQ(messages[0].content.non_space_bytes, text.size() - static_cast<std::size_t>(spaces));
  }
}

TEST(ApiBodyScan, TextPartsAreJoinedAndOtherPartsWeighNothing) {
  const json parts = json::array({{{"type", "text"}, {"text", "abc"}},
                                  {{"type", "image_url"}, {"image_url", {{"url", "http://x/long-url"}}}},
                                  {{"text", "de"}, {"type", "text"}}});
  const auto messages = messages_of(json({{"messages", json::array({{{"role", "user"}, {"content", parts}}})}}).dump());
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].content.bytes, 6u);  // "abc\nde"
  EXPECT_EQ(messages[0].content.non_space_bytes, 5u);
}

TEST(ApiBodyScan, TheLastOfDuplicateKeysWins) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "x"}],
          "messages": [{"role": "assistant", "content": "first", "role": "tool", "content": "second!"}]})";
  const auto messages = messages_of(body);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].role, "tool");
  EXPECT_EQ(messages[0].content.bytes, 7u);
  EXPECT_EQ(json::parse(body)["messages"][0]["content"], "second!");  // the parser agrees
}

TEST(ApiBodyScan, SkipsDeepValuesWithoutRecursing) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::string body = R"({"extra": )" + deep + R"(, "messages": [{"role": "user", "content": "hi", "x": )" + deep + "}]}";
  const auto messages = messages_of(body);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].content.bytes, 2u);
}

TEST(ApiBodyScan, LeavesWhatItCannotFollowToTheParser) {
  EXPECT_FALSE(scan_chat_messages("not json").has_value());
  EXPECT_FALSE(scan_chat_messages(R"({"messages": [{"role": "user", "content": "unterminated}]})").has_value());
  EXPECT_FALSE(scan_chat_messages(R"({"messages": "text"})").has_value());
  EXPECT_FALSE(scan_chat_messages(R"({"messages": [1, 2]})").has_value());
  EXPECT_FALSE(scan_chat_messages(R"({"messages": []} trailing)").has_value());
  EXPECT_FALSE(scan_chat_messages(R"({"messages": [{"content": "bad \x escape"}]})").has_value());
  EXPECT_FALSE(scan_chat_messages(R"({"prompt": "no messages"})").has_value());
  EXPECT_FALSE(scan_chat_messages(R"({"messages": [{"content": "\ud800 lone surrogate"}]})").has_value());
}

TEST(ApiBodyScan, CompletionPromptIsAStringOrAOneStringArray) {
  EXPECT_EQ(scan_completion_prompt(R"({"prompt": "a b\tc", "max_tokens": 1})")->bytes, 5u);
  EXPECT_EQ(scan_completion_prompt(R"({"prompt": "a b\tc"})")->non_space_bytes, 3u);
  EXPECT_EQ(scan_completion_prompt(R"({"prompt": ["only one"]})")->bytes, 8u);
  EXPECT_FALSE(scan_completion_prompt(R"({"prompt": [1, 2, 3]})").has_value());
  EXPECT_FALSE(scan_completion_prompt(R"({"prompt": ["one", "two"]})").has_value());
  EXPECT_FALSE(scan_completion_prompt(R"({"messages": []})").has_value());
  EXPECT_EQ(scan_completion_prompt(R"({"prompt": [1], "prompt": "later wins"})")->bytes, 10u);
}

}  // namespace
}  // namespace prefixd::api
