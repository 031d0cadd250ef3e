// Each family's KV memory through the real server: chats that grow turn by turn, alone and side by
// side, never find the model's memory short (every request 200, no failed decode in the log), and a
// prompt that can never fit is refused with a 400 that names the limit before anything runs.
//
// The sliding-window preset keeps only its window (the default with the prompt cache on), where
// libllama gives the window layers about window × sequences + one batch cells and lets a decode
// take over only a window cell that one sequence alone owns behind its window. A first turn that
// fills most of that pool used to leave all its cells to the entry that kept it, and the second
// turn, sharing them, found no room for its batch ("failed to find a memory slot", a 500).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

std::string model_path(const std::string& preset) { return std::string(PREFIXD_TEST_MODELS_DIR) + "/" + preset + ".gguf"; }

// Words the generated vocabularies split into a few tokens each: `count` of them make a prompt
// several times longer than the window.
std::string filler(const std::string& tag, int count) {
  std::string text;
  for (int i = 0; i < count; ++i) text += " " + tag + "x" + std::to_string(i);
  return text;
}

// Lines of the server's log that say a batch did not fit or a request failed for lack of memory.
std::string memory_failures(const std::string& log) {
  std::string found;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    if (line.find("failed to find a memory slot") != std::string::npos || line.find("decode failed") != std::string::npos ||
        line.find("the context is full") != std::string::npos) {
      found += line + "\n";
    }
    start = end + 1;
  }
  return found;
}

struct Turn {
  int prompt = 0;  // prompt tokens
  int cached = 0;  // of which the cache served
};

// A chat of `turns` turns, each sent with the whole history; returns each turn's prompt and cached
// tokens, and fails the test at the first non-200. Replies are one token long: the server keeps
// exactly the prompt (the last sampled token is never decoded), so whatever the reply's text
// becomes in the next prompt, the next turn extends the kept entry and adopts its cells whole,
// sharing them with the entry (the case that ran out of window cells).
std::vector<Turn> grow_chat(const ServerProcess& server, const std::string& user, int system_words, int turn_words,
                            int turns) {
  auto client = server.client();
  json messages = json::array({{{"role", "system"}, {"content", "You are a helpful assistant." + filler("rule", system_words)}}});
  std::vector<Turn> prompts;
  for (int turn = 0; turn < turns; ++turn) {
    messages.push_back({{"role", "user"}, {"content", "Turn " + std::to_string(turn) + " from " + user + ":" +
                                                          filler("w" + std::to_string(turn), turn_words)}});
    const auto reply = post_json(*client, "/v1/chat/completions",
                                 {{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}, {"user", user}});
    EXPECT_EQ(reply.status, 200) << user << " turn " << turn << ": " << reply.raw;
    if (reply.status != 200) break;
    prompts.push_back({reply.body["usage"]["prompt_tokens"].get<int>(), reply.body["prompt_cache"]["cached_tokens"].get<int>()});
    messages.push_back({{"role", "assistant"}, {"content", reply.body["choices"][0]["message"]["content"]}});
  }
  return prompts;
}

struct Drawn {
  std::string preset;
  int parallel;
  int ctx_size;
  std::vector<std::string> args;
  int sessions;       // chats running side by side
  int system_words;   // the system prompt's size
  int turn_words;     // each user turn's size
  int first_turn_at_least = 0;  // tokens
};

void run_chats(const Drawn& d) {
  SCOPED_TRACE(d.preset + " --parallel " + std::to_string(d.parallel) + " --ctx-size " + std::to_string(d.ctx_size));
  ServerProcess server({.model = model_path(d.preset), .extra_args = d.args, .parallel = d.parallel, .ctx_size = d.ctx_size});
  std::vector<std::thread> chats;
  std::vector<std::vector<Turn>> prompts(static_cast<size_t>(d.sessions));
  for (int s = 0; s < d.sessions; ++s) {
    chats.emplace_back([&, s] {
      prompts[static_cast<size_t>(s)] =
          grow_chat(server, "user" + std::to_string(s), d.system_words + 7 * s, d.turn_words, /*turns=*/4);
    });
  }
  for (std::thread& t : chats) t.join();
  for (const std::vector<Turn>& turns : prompts) {
    ASSERT_EQ(turns.size(), 4u) << "every turn of every chat is answered";
    // A chat alone resumes each turn where the previous prompt ended, or later.
    for (size_t t = 1; t < turns.size() && d.sessions == 1; ++t) EXPECT_GE(turns[t].cached, turns[t - 1].prompt);
  }
  EXPECT_GE(prompts[0][0].prompt, d.first_turn_at_least) << "the first turn fills most of the window cache";
  EXPECT_EQ(memory_failures(server.log()), "") << "no batch ever lacked memory";
}

// The reported configuration: one slot, an 8192-cell context, a first turn of about 1,760 tokens
// in a window pool of 1,792 cells; its second turn was a 500.
TEST(FamilyMemory, WindowChatGrowingTurnByTurnAlwaysFindsCells) {
  run_chats({.preset = "gemma3-tiny", .parallel = 1, .ctx_size = 8192, .args = {}, .sessions = 1, .system_words = 150,
             .turn_words = 150, .first_turn_at_least = 1600});
}

// Smaller batches make a smaller window pool (1,280 cells here), which a first turn of about
// 1,400 tokens overruns: the same failure.
TEST(FamilyMemory, WindowChatWithSmallBatchesAlwaysFindsCells) {
  run_chats({.preset = "gemma3-tiny", .parallel = 1, .ctx_size = 4096, .args = {"--batch-size", "128"}, .sessions = 1,
             .system_words = 200, .turn_words = 60, .first_turn_at_least = 1300});
}

// Several chats at once, each adopting its own entry while the others prefill.
TEST(FamilyMemory, WindowChatsSideBySideAlwaysFindCells) {
  run_chats({.preset = "gemma3-tiny", .parallel = 3, .ctx_size = 8192, .args = {"--batch-size", "256"}, .sessions = 3,
             .system_words = 120, .turn_words = 60});
}

// The recurrent and hybrid presets: recurrent slots are per sequence, holders included.
TEST(FamilyMemory, RecurrentAndHybridChatsSideBySideAlwaysFindMemory) {
  run_chats({.preset = "mamba2-tiny", .parallel = 2, .ctx_size = 4096, .args = {"--batch-size", "64"}, .sessions = 2,
             .system_words = 100, .turn_words = 60});
  run_chats({.preset = "qwen35-tiny", .parallel = 2, .ctx_size = 4096, .args = {}, .sessions = 3, .system_words = 100,
             .turn_words = 60});
}

// A prompt longer than the context can never be admitted: a 400 naming the limit, answered before
// the request is queued (nothing is decoded), and the server goes on serving.
TEST(FamilyMemory, PromptThatCanNeverFitIsRefusedWithTheLimit) {
  ServerProcess server({.model = model_path("gemma3-tiny"), .parallel = 1, .ctx_size = 512});
  auto client = server.client();
  const json too_long = {{"messages", {{{"role", "user"}, {"content", filler("long", 400)}}}}, {"max_tokens", 4}};
  const auto refused = post_json(*client, "/v1/chat/completions", too_long);
  ASSERT_EQ(refused.status, 400) << refused.raw;
  EXPECT_EQ(refused.body["error"]["code"], "context_length_exceeded");
  EXPECT_NE(refused.body["error"]["message"].get<std::string>().find("511"), std::string::npos)
      << "the message names the limit: " << refused.raw;
  const json stats = get_json(*client, "/v1/cache/stats").body;
  EXPECT_EQ(stats["running"], 0);
  const auto fits = post_json(*client, "/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", "hello"}}}}, {"max_tokens", 4}});
  EXPECT_EQ(fits.status, 200) << fits.raw;
  EXPECT_EQ(memory_failures(server.log()), "");
}

}  // namespace
}  // namespace prefixd::testing
