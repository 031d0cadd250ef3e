// The fill-in-the-middle prompt of POST /infill: llama-server's layout and its truncation rules.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/native/infill_prompt.h"

namespace prefixd::api {
namespace {

using engine::Token;

// One token per byte; the markers are ids above the bytes.
std::vector<Token> bytes(std::string_view text) { return {text.begin(), text.end()}; }

constexpr Token kPre = 1000, kSuf = 1001, kMid = 1002, kRep = 1003, kSep = 1004, kBos = 1005;

std::vector<Token> cat(std::initializer_list<std::vector<Token>> parts) {
  std::vector<Token> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(InfillPrompt, RepositoryFilesThenPrefixPromptSuffixAndMiddle) {
  const engine::InfillTokens markers{.prefix = kPre, .suffix = kSuf, .middle = kMid, .repository = kRep, .file_separator = kSep};
  const std::vector<InfillFile> extra = {{.filename = "a.py", .text = "x = 1"}, {.filename = "b.py", .text = "y"}};
  const std::vector<Token> prompt = bytes("ret");
  const auto out = infill_prompt(markers, bytes,
                                 {.prefix = "def f():\n    ", .suffix = "\nprint(f())", .prompt = prompt, .extra = extra},
                                 {.context = 4096, .max_tokens = 16});
  const auto expected = cat({{kRep}, bytes("myproject\n"), {kSep}, bytes("a.py\n"), bytes("x = 1"), {kSep}, bytes("b.py\n"),
                             bytes("y"), {kSep}, bytes("filename\n"), {kPre}, bytes("def f():\n    "), bytes("ret"), {kSuf},
                             bytes("\nprint(f())"), {kMid}});
  EXPECT_EQ(out, expected);
}

TEST(InfillPrompt, WithoutFileMarkersChunksAreSnippetsAndBeginOpensTheFile) {
  const engine::InfillTokens markers{.prefix = kPre, .suffix = kSuf, .middle = kMid, .begin = kBos};
  const std::vector<InfillFile> extra = {{.filename = "a.py", .text = "x"}};
  const auto out = infill_prompt(markers, bytes, {.prefix = "p", .suffix = "s", .extra = extra}, {.context = 4096});
  EXPECT_EQ(out, cat({bytes("\n\n--- snippet ---\n\n"), bytes("x"), {kBos, kPre}, bytes("p"), {kSuf}, bytes("s"), {kMid}}));
}

TEST(InfillPrompt, PrefixKeepsItsEndSuffixItsStartAndContextWhatTheWindowLeaves) {
  const engine::InfillTokens markers{.prefix = kPre, .suffix = kSuf, .middle = kMid, .file_separator = kSep};
  const std::string prefix(2000, 'p'), suffix(1000, 's');
  const std::string chunk = std::string(300, 'a') + std::string(300, 'b');
  const std::vector<InfillFile> extra = {{.filename = "f", .text = chunk}};
  const std::vector<Token> prompt = bytes("xyz");
  // Context 2048 + 2*100 + 50: 50 tokens of the repository context fit.
  const auto out = infill_prompt(markers, bytes, {.prefix = prefix, .suffix = suffix, .prompt = prompt, .extra = extra},
                                 {.context = kInfillWindow + 200 + 50, .max_tokens = 100});
  const std::size_t prefix_take = 3 * (kInfillWindow / 4);                // 1536
  const std::size_t suffix_take = kInfillWindow / 4 - (2 + prompt.size());  // 507
  ASSERT_EQ(out.size(), 50 + 1 + prefix_take + 3 + 1 + suffix_take + 1);
  // The context's last 50 tokens: the end of the chunk, then the current file's separator.
  const auto context_tail = cat({bytes(chunk), {kSep}, bytes("filename\n")});
  EXPECT_EQ(std::vector<Token>(out.begin(), out.begin() + 50), std::vector<Token>(context_tail.end() - 50, context_tail.end()));
  EXPECT_EQ(out[50], kPre);
  EXPECT_EQ(out[51 + prefix_take], 'x');
  EXPECT_EQ(out[51 + prefix_take + 3], kSuf);
  EXPECT_EQ(out.back(), kMid);

  // A small context leaves no room for other files; n_predict -1 counts as llama-server counts it.
  const auto tight = infill_prompt(markers, bytes, {.prefix = "p", .suffix = "s", .extra = extra},
                                   {.context = kInfillWindow - 2, .max_tokens = -1});
  EXPECT_EQ(tight, cat({{kPre}, bytes("p"), {kSuf}, bytes("s"), {kMid}}));
  const auto two = infill_prompt(markers, bytes, {.prefix = "p", .suffix = "s", .extra = extra},
                                 {.context = kInfillWindow, .max_tokens = -1});
  EXPECT_EQ(two, cat({bytes("e\n"), {kPre}, bytes("p"), {kSuf}, bytes("s"), {kMid}})) << "two tokens of context";
}

}  // namespace
}  // namespace prefixd::api
