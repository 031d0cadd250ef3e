// The toolloop workload's shape, how the next turn is built from the server's reply (streamed
// tool-call pieces joined, the call sent back with a tool message), and its checks on made-up
// runs: exact fed counts pass; a turn that fed one token more (a server that cached the reply
// differently from how the next turn renders it) fails; a server that cannot count skips.
#include <gtest/gtest.h>

#include <format>

#include "bench/checks.h"
#include "bench/next_turn.h"
#include "bench/request.h"
#include "bench/sse.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

using nlohmann::json;

TEST(BenchToolLoop, EachSessionForcesACallEveryTurnAndContinuesItsPreviousTurn) {
  const Workload w = make_workload("toolloop", {.seed = 7, .scale = 1, .words_per_token = 0.7, .reps = 3});
  ASSERT_EQ(w.steps.size(), static_cast<std::size_t>(3 * kToolLoopTurns));
  ASSERT_EQ(w.arms.size(), static_cast<std::size_t>(kToolLoopTurns));
  for (std::size_t i = 0; i < w.steps.size(); ++i) {
    const Step& s = w.steps[i];
    const int turn = static_cast<int>(i) % kToolLoopTurns;
    EXPECT_EQ(s.arm, std::format("turn {}", turn + 1));
    EXPECT_EQ(s.session, std::format("toolloop-{}", i / kToolLoopTurns));
    const json body = step_body(s, {.max_tokens = s.max_tokens, .session = s.session});
    EXPECT_EQ(body["tool_choice"], "required");
    EXPECT_EQ(body["parallel_tool_calls"], false);
    ASSERT_TRUE(body["tools"].is_array());
    for (const auto& tool : body["tools"]) {
      EXPECT_EQ(tool["function"]["parameters"]["additionalProperties"], false) << tool.dump();
    }
    if (turn == 0) {
      EXPECT_EQ(s.continues, -1);
      EXPECT_EQ(s.messages.size(), 2u) << "system and task";
    } else {
      EXPECT_EQ(s.continues, static_cast<int>(i) - 1);
      EXPECT_EQ(s.after, static_cast<int>(i) - 1);
      EXPECT_FALSE(s.tool_result.empty());
    }
  }
  EXPECT_EQ(w.steps[static_cast<std::size_t>(w.gate_index())].continues, -1) << "the gates replay a first turn";
  EXPECT_GE(w.ctx_size, 4096);
}

TEST(BenchToolLoop, StreamedToolCallPiecesAreJoinedAndCountAsTheFirstToken) {
  StreamReader reader;
  reader.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n");
  EXPECT_FALSE(reader.first_token_seen());
  reader.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":"
              "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n");
  EXPECT_TRUE(reader.first_token_seen());
  reader.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
              "\"{\\\"city\\\": \"}}]}}]}\n\n");
  reader.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
              "\"\\\"Oslo\\\"}\"}}]}}]}\n\n");
  reader.feed("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
  const auto& r = reader.result();
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0]["id"], "call_1");
  EXPECT_EQ(r.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.tool_calls[0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
  EXPECT_EQ(r.finish_reason, "tool_calls");
}

TEST(BenchToolLoop, TheNextTurnSendsTheReplyBackWithAToolMessage) {
  const json sent = json::array({{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "u"}}});
  const json calls = json::array({{{"id", "call_1"}, {"type", "function"},
                                   {"function", {{"name", "search"}, {"arguments", "{}"}}}}});
  const json next = next_turn_messages(sent, calls, "", "sunny");
  ASSERT_EQ(next.size(), 4u);
  EXPECT_EQ(next[2]["role"], "assistant");
  EXPECT_TRUE(next[2]["content"].is_null());
  EXPECT_EQ(next[2]["tool_calls"], calls);
  EXPECT_EQ(next[3], (json{{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}));
  EXPECT_EQ(through_reply(sent, calls, ""), json(std::vector<json>(next.begin(), next.begin() + 3)));
  // A reply without calls goes back as text, and the result as the user's next message.
  const json plain = next_turn_messages(sent, json::array(), "hello", "sunny");
  EXPECT_EQ(plain[2], (json{{"role", "assistant"}, {"content", "hello"}}));
  EXPECT_EQ(plain[3], (json{{"role", "user"}, {"content", "sunny"}}));
}

// Turn 1 of a session, then two later turns that fed `second_fed` and 38 tokens.
json run_with(std::int64_t second_fed, bool counted = true) {
  const json call = json::array({{{"id", "c"}, {"type", "function"}, {"function", {{"name", "search"}, {"arguments", "{}"}}}}});
  auto request = [&](int step, std::int64_t prompt, std::int64_t fed, std::int64_t history) {
    json r = {{"step", step}, {"arm", std::format("turn {}", step + 1)}, {"prompt_tokens", prompt}, {"fed_tokens", fed},
              {"cached", prompt - fed}, {"ttft_ms", 10}, {"finish_reason", "tool_calls"}, {"tool_calls", call}};
    if (history >= 0) r["history_tokens"] = counted ? history : -1;
    return r;
  };
  return {{"requests", json::array({request(0, 400, 400, -1), request(1, 478, second_fed, 440), request(2, 556, 38, 518)})}};
}

Check::Verdict verdict(const std::vector<Check>& checks, std::size_t i) { return checks.at(i).verdict; }

TEST(BenchToolLoop, LaterTurnsPassOnlyWhenTheyFedExactlyTheToolResultAndItsScaffolding) {
  const json workload = {{"name", "toolloop"}};
  const auto exact = workload_checks(workload, run_with(38));
  ASSERT_EQ(exact.size(), 2u);
  EXPECT_EQ(verdict(exact, 0), Check::Verdict::pass) << exact[0].detail;
  EXPECT_EQ(verdict(exact, 1), Check::Verdict::pass) << exact[1].detail;
  EXPECT_NE(exact[1].detail.find("fed 38–38"), std::string::npos) << exact[1].detail;

  const auto one_more = workload_checks(workload, run_with(39));
  EXPECT_EQ(verdict(one_more, 1), Check::Verdict::fail);
  EXPECT_NE(one_more[1].detail.find("step 1"), std::string::npos) << one_more[1].detail;
  const auto whole = workload_checks(workload, run_with(478));
  EXPECT_EQ(verdict(whole, 1), Check::Verdict::fail) << "a server that re-fed the conversation";

  json no_call = run_with(38);
  no_call["requests"][2]["finish_reason"] = "length";
  EXPECT_EQ(verdict(workload_checks(workload, no_call), 0), Check::Verdict::fail);

  const auto uncounted = workload_checks(workload, run_with(38, false));
  EXPECT_EQ(verdict(uncounted, 0), Check::Verdict::skip);
  EXPECT_EQ(verdict(uncounted, 1), Check::Verdict::skip);
}

}  // namespace
}  // namespace prefixd::bench
