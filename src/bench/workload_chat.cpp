// Conversation workloads: an agent loop, a multi-session chat trace, an edited conversation, and a
// chat that does all of it on one slot (turns, a resend, an edit, a second session).
// Assistant turns in the transcripts are written by the generator, not taken from the server's
// reply, so both servers get the same bytes (on random weights the replies are noise anyway); each
// turn still asks for a few generated tokens.
//
// Turn lengths follow the shape of public multi-turn chat traces: LMSYS-Chat-1M reports means of
// 69.5 prompt and 214.5 response tokens per turn. Full size (BENCH_SCALE=4) uses log-normal
// medians 48 (σ 1.0) and 180 (σ 0.7), means about 79 and 230; the default is a quarter of it.
#include <format>

#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kAgent = 11;
constexpr std::uint64_t kMulti = 12;
constexpr std::uint64_t kEdit = 13;
constexpr std::uint64_t kChat = 14;
constexpr int kChatReply = 8;  // generated tokens per chat turn

constexpr LogNormal kUserTurn{.median = 12, .sigma = 1.0, .lo = 4, .hi = 256};
constexpr LogNormal kAssistantTurn{.median = 45, .sigma = 0.7, .lo = 8, .hi = 256};

struct Turn {
  std::string user;
  int user_tokens = 0;
  std::string assistant;
  int assistant_tokens = 0;
};

// `turns` user/assistant pairs of one conversation, from its own seed.
std::vector<Turn> conversation(std::uint64_t seed, int turns, const WorkloadParams& p) {
  SeededRng rng(seed);
  std::vector<Turn> out;
  for (int t = 0; t < turns; ++t) {
    Turn turn;
    turn.user_tokens = draw_length(rng, kUserTurn, p.scale);
    turn.assistant_tokens = draw_length(rng, kAssistantTurn, p.scale);
    turn.user = question_of(derive_seed(seed, 1, static_cast<std::uint64_t>(t)), turn.user_tokens, p.words_per_token);
    turn.assistant = text_of(derive_seed(seed, 2, static_cast<std::uint64_t>(t)), turn.assistant_tokens, p.words_per_token);
    out.push_back(std::move(turn));
  }
  return out;
}

// The prompt of turn `upto` (0-based): system, the earlier turns with their replies, its question.
Transcript prompt_until(const std::string& system, int system_tokens, const std::vector<Turn>& turns, int upto) {
  Transcript t;
  t.add("system", system, system_tokens);
  for (int i = 0; i < upto; ++i) {
    t.add("user", turns[static_cast<std::size_t>(i)].user, turns[static_cast<std::size_t>(i)].user_tokens);
    t.add("assistant", turns[static_cast<std::size_t>(i)].assistant, turns[static_cast<std::size_t>(i)].assistant_tokens);
  }
  t.add("user", turns[static_cast<std::size_t>(upto)].user, turns[static_cast<std::size_t>(upto)].user_tokens);
  return t;
}

// The conversation with turn `at`'s question edited: its first half kept, the rest rewritten.
std::vector<Turn> edited_at(std::vector<Turn> turns, int at, std::uint64_t seed, const WorkloadParams& p) {
  auto& question = turns[static_cast<std::size_t>(at)];
  const int kept = question.user_tokens / 2;
  const auto k = static_cast<std::uint64_t>(at);
  question.user = text_of(derive_seed(seed, 1, k), kept, p.words_per_token) + ", or rather " +
                  question_of(derive_seed(seed, 3, k), question.user_tokens - kept, p.words_per_token);
  return turns;
}

}  // namespace

Workload make_agent(const WorkloadParams& p) {
  constexpr int kTurns = 10;
  Workload w = named_workload("agent", "Growing agent loop", "turn", 1);
  const int system_tokens = scaled(384, p.scale, 16);
  const int task_tokens = scaled(16, p.scale, 4);
  const int call_tokens = scaled(12, p.scale, 4);
  const LogNormal result_shape{.median = 64, .sigma = 0.6, .lo = 8, .hi = 512};
  w.description = std::format(
      "{} agent runs one after another, {} turns each, one system prompt with the tool definitions ({} tokens) shared "
      "by all runs. Turn k resends the whole transcript: the task, then per earlier turn the assistant's tool call "
      "(~{} tokens) and the tool result (log-normal, median {} tokens). max_tokens {}. --parallel 1.",
      p.reps, kTurns, system_tokens, call_tokens, scaled(64, p.scale, 8), kChatReply);
  for (int t = 1; t <= kTurns; ++t) w.arms.push_back({.name = std::format("turn {}", t)});
  const std::string system =
      "You are a research agent. Tools: search(query), open(url), note(text). Reply with one <tool_call> per turn.\n" +
      text_of(derive_seed(p.seed, kAgent, 0), system_tokens, p.words_per_token);
  for (int run = 0; run < repetitions(p.reps); ++run) {
    const auto run_seed = derive_seed(p.seed, kAgent, 1, static_cast<std::uint64_t>(run));
    SeededRng rng(run_seed);
    Transcript t;
    t.add("system", system, system_tokens + 24);
    t.add("user", "Task: " + text_of(derive_seed(run_seed, 1), task_tokens, p.words_per_token), task_tokens);
    for (int turn = 1; turn <= kTurns; ++turn) {
      if (turn > 1) {
        const auto k = static_cast<std::uint64_t>(turn);
        const std::string call = std::format(R"(<tool_call>{{"name": "search", "arguments": {{"query": "{}"}}}}</tool_call>)",
                                             text_of(derive_seed(run_seed, 2, k), call_tokens, p.words_per_token));
        t.add("assistant", call, call_tokens + 16);
        const int result_tokens = draw_length(rng, result_shape, p.scale);
        t.add("user", "<tool_response>" + text_of(derive_seed(run_seed, 3, k), result_tokens, p.words_per_token) + "</tool_response>",
              result_tokens + 8);
      }
      w.steps.push_back(chat_step(std::format("turn {}", turn), std::format("agent-run-{}", run), t, kChatReply, turn));
    }
  }
  return w;
}

Workload make_multisession(const WorkloadParams& p) {
  constexpr int kSessions = 16;
  Workload w = named_workload("multisession", "Multi-session chat trace", "request", 2,
                              plain_arms({"first turns", "later turns"}));
  w.concurrency = 2;
  const int system_tokens = scaled(128, p.scale, 16);
  w.description = std::format(
      "{} chat sessions of 4–8 turns, interleaved in a seeded random order (a session's next turn waits for its "
      "previous one), two requests in flight, one {}-token system prompt shared by all. Turn lengths log-normal like "
      "public chat traces: user median {} tokens, assistant median {}. max_tokens {}. More sessions than slots: "
      "--parallel 2 on both servers.",
      kSessions, system_tokens, scaled(12, p.scale, 4), scaled(45, p.scale, 8), kChatReply);
  const std::string system = text_of(derive_seed(p.seed, kMulti, 0), system_tokens, p.words_per_token);
  SeededRng rng(derive_seed(p.seed, kMulti, 1));
  std::vector<std::vector<Turn>> sessions;
  std::vector<int> left;
  int total = 0;
  for (int s = 0; s < kSessions; ++s) {
    const int turns = static_cast<int>(rng.uniform(4, 9));
    sessions.push_back(conversation(derive_seed(p.seed, kMulti, 2, static_cast<std::uint64_t>(s)), turns, p));
    left.push_back(turns);
    total += turns;
  }
  std::vector<int> last_step(kSessions, -1);
  while (total > 0) {
    // A session with more turns left is proportionally more likely to speak next.
    auto pick = static_cast<int>(rng.uniform(0, static_cast<std::uint64_t>(total)));
    int s = 0;
    while (pick >= left[static_cast<std::size_t>(s)]) pick -= left[static_cast<std::size_t>(s++)];
    const auto& turns = sessions[static_cast<std::size_t>(s)];
    const int turn = static_cast<int>(turns.size()) - left[static_cast<std::size_t>(s)];
    Step step = chat_step(turn == 0 ? "first turns" : "later turns", std::format("chat-session-{}", s),
                          prompt_until(system, system_tokens, turns, turn), kChatReply,
                          static_cast<double>(w.steps.size() + 1));
    step.after = last_step[static_cast<std::size_t>(s)];
    w.steps.push_back(std::move(step));
    last_step[static_cast<std::size_t>(s)] = static_cast<int>(w.steps.size()) - 1;
    --left[static_cast<std::size_t>(s)];
    --total;
  }
  return w;
}

Workload make_edit(const WorkloadParams& p) {
  constexpr int kTurns = 6;
  constexpr int kEdited = 2;  // 0-based: the 3rd turn
  Workload w = named_workload("edit", "Edit and regenerate", "request", 2,
                              plain_arms({"turn 1", "turns 2–6", "edit turn 3", "regenerate edited",
                                          "regenerate original turn 6"}));
  const int system_tokens = scaled(128, p.scale, 16);
  w.description = std::format(
      "{} conversations one after another ({}-token system prompt shared, chat-trace turn lengths), each: turns 1–{}; "
      "then turn 3's question is edited (the second half rewritten) and sent; the edited turn is regenerated (same "
      "request again); then the user goes back to the original branch and regenerates turn {}. max_tokens {}. "
      "--parallel 2.",
      p.reps, system_tokens, kTurns, kTurns, kChatReply);
  const std::string system = text_of(derive_seed(p.seed, kEdit, 0), system_tokens, p.words_per_token);
  for (int c = 0; c < repetitions(p.reps); ++c) {
    const auto seed = derive_seed(p.seed, kEdit, 1, static_cast<std::uint64_t>(c));
    const auto turns = conversation(seed, kTurns, p);
    const std::string session = std::format("edit-conversation-{}", c);
    auto add = [&](const std::string& arm, const Transcript& t) {
      w.steps.push_back(chat_step(arm, session, t, kChatReply, static_cast<double>(w.steps.size() + 1)));
    };
    for (int t = 0; t < kTurns; ++t) add(t == 0 ? "turn 1" : "turns 2–6", prompt_until(system, system_tokens, turns, t));
    const Transcript edit = prompt_until(system, system_tokens, edited_at(turns, kEdited, seed, p), kEdited);
    add("edit turn 3", edit);
    add("regenerate edited", edit);
    add("regenerate original turn 6", prompt_until(system, system_tokens, turns, kTurns - 1));
  }
  return w;
}

Workload make_chat(const WorkloadParams& p) {
  constexpr int kTurns = 6;
  constexpr int kEdited = 2;  // 0-based: the 3rd turn
  constexpr int kSecondTurns = 3;
  Workload w = named_workload("chat", "Chat: turns, resend, edit, second session", "request", 1,
                              plain_arms({"turn 1", "turns 2–6", "resend turn 6", "edit turn 3", "second session turn 1",
                                          "second session turns 2–3"}));
  const int system_tokens = scaled(128, p.scale, 16);
  w.description = std::format(
      "{} rounds one after another, one {}-token system prompt shared by all, chat-trace turn lengths, assistant turns "
      "written by the client: a {}-turn chat; its last request sent again unchanged; turn 3's question edited (the "
      "second half rewritten) and sent; then a second session with {} turns of its own. max_tokens {}. --parallel 1, "
      "so every switch of conversation goes through the host memory of both servers.",
      p.reps, system_tokens, kTurns, kSecondTurns, kChatReply);
  const std::string system = text_of(derive_seed(p.seed, kChat, 0), system_tokens, p.words_per_token);
  for (int c = 0; c < repetitions(p.reps); ++c) {
    const auto seed = derive_seed(p.seed, kChat, 1, static_cast<std::uint64_t>(c));
    auto add = [&](const std::string& arm, const std::string& session, const Transcript& t) {
      w.steps.push_back(chat_step(arm, session, t, kChatReply, static_cast<double>(w.steps.size() + 1)));
    };
    const std::string first = std::format("chat-{}-first", c);
    const auto turns = conversation(seed, kTurns, p);
    for (int t = 0; t < kTurns; ++t) add(t == 0 ? "turn 1" : "turns 2–6", first, prompt_until(system, system_tokens, turns, t));
    add("resend turn 6", first, prompt_until(system, system_tokens, turns, kTurns - 1));
    add("edit turn 3", first, prompt_until(system, system_tokens, edited_at(turns, kEdited, seed, p), kEdited));
    const std::string second = std::format("chat-{}-second", c);
    const auto other = conversation(derive_seed(seed, 4), kSecondTurns, p);
    for (int t = 0; t < kSecondTurns; ++t) {
      add(t == 0 ? "second session turn 1" : "second session turns 2–3", second, prompt_until(system, system_tokens, other, t));
    }
  }
  return w;
}

}  // namespace prefixd::bench
