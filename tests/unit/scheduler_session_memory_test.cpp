// What the scheduler remembers of a session between requests: whether its client sends replies
// back verbatim (the warm-up's condition), and which prompt inputs a request changed.
#include <gtest/gtest.h>

#include <vector>

#include "scheduler/session_memory.h"

namespace prefixd::scheduler {
namespace {

using Tokens = std::vector<engine::Token>;
using Names = std::vector<std::string>;

TEST(SessionMemory, AClientThatSendsTheReplyBackEchoes) {
  SessionMemory memory;
  const Tokens first = {1, 2, 3, 4, 50, 51};  // prompt of 4, reply 50 51
  memory.remember_reply("s", first, 4);
  EXPECT_FALSE(memory.echoes("s")) << "nothing observed yet";
  memory.observe_prompt("s", Tokens{1, 2, 3, 4, 50, 51, 7, 8});
  EXPECT_TRUE(memory.echoes("s"));
  memory.observe_prompt("s", Tokens{1, 2, 3, 4, 60, 61, 7, 8});
  EXPECT_FALSE(memory.echoes("s")) << "its own assistant turn instead of the reply";
  // A prompt that does not extend the previous one says nothing: the verdict stays.
  memory.observe_prompt("s", Tokens{1, 2, 3, 4, 50, 51, 7});
  ASSERT_TRUE(memory.echoes("s"));
  memory.observe_prompt("s", Tokens{9, 9});
  EXPECT_TRUE(memory.echoes("s"));
  EXPECT_FALSE(memory.echoes("other"));
}

TEST(SessionMemory, ChangedInputsNameWhatDiffersFromTheSessionsPreviousRequest) {
  SessionMemory memory;
  const PromptInputs base = {{"chat_template", 1}, {"chat_template_kwargs", 2}, {"tools", 3}, {"tool_choice", 4}};
  EXPECT_TRUE(memory.changed_inputs("s", base).empty()) << "a first request changes nothing";
  EXPECT_TRUE(memory.changed_inputs("s", base).empty());
  PromptInputs forced = base;
  forced[3].second = 5;
  EXPECT_EQ(memory.changed_inputs("s", forced), Names{"tool_choice"});
  EXPECT_EQ(memory.changed_inputs("s", base), Names{"tool_choice"}) << "and back";
  const PromptInputs raw = {{"chat_template", 9}};
  EXPECT_EQ(memory.changed_inputs("s", raw), (Names{"chat_template", "chat_template_kwargs", "tools", "tool_choice"}));
  EXPECT_TRUE(memory.changed_inputs("other", forced).empty()) << "sessions are apart";
}

TEST(SessionMemory, ItKeepsAtMostItsBoundOfSessions) {
  SessionMemory memory;
  const Tokens turn = {1, 2, 3};
  for (std::size_t i = 0; i < SessionMemory::kMaxSessions + 10; ++i) {
    memory.changed_inputs("s" + std::to_string(i), PromptInputs{{"tools", i}});
    memory.remember_reply("s" + std::to_string(i), turn, 2);
  }
  EXPECT_EQ(memory.sessions(), SessionMemory::kMaxSessions);
}

}  // namespace
}  // namespace prefixd::scheduler
