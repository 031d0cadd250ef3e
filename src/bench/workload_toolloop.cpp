// The toolloop workload: agent loops whose calls come from the server. Each session is a system
// prompt with a small tool set and a user task; every turn forces one tool call (tool_choice
// "required", parallel_tool_calls false), and the next turn sends back the server's own reply
// (its tool_calls) and a tool message with a fixed result (bench/next_turn.h). The claim is
// counted in tokens (bench/checks_toolloop.cpp): from turn 2 on, prefixd feeds exactly the tool
// result and its scaffolding, because it cached the reply as the next turn renders it.
//
// The schemas are tight (bounded strings and integers, enums, no extra properties), so a model
// with random weights, steered by the call grammar, finishes a call in a few dozen tokens.
#include <format>

#include "bench/workload_build.h"

namespace prefixd::bench {
namespace {

constexpr std::uint64_t kToolLoop = 41;
constexpr int kCallTokens = 96;  // max_tokens: room for the longest call the schemas allow

nlohmann::json loop_tools() {
  return nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Forecast for a city.",
      "parameters": {"type": "object", "additionalProperties": false, "required": ["city", "days"],
        "properties": {"city": {"type": "string", "maxLength": 12},
                       "days": {"type": "integer", "minimum": 1, "maximum": 7}}}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web or the news.",
      "parameters": {"type": "object", "additionalProperties": false, "required": ["query", "source"],
        "properties": {"query": {"type": "string", "maxLength": 16},
                       "source": {"type": "string", "enum": ["web", "news"]}}}}},
    {"type": "function", "function": {"name": "convert", "description": "Convert a temperature.",
      "parameters": {"type": "object", "additionalProperties": false, "required": ["value", "unit"],
        "properties": {"value": {"type": "integer", "minimum": -60, "maximum": 60},
                       "unit": {"type": "string", "enum": ["C", "F"]}}}}}])");
}

}  // namespace

Workload make_toolloop(const WorkloadParams& p) {
  Workload w = named_workload("toolloop", "Agent loop with the server's own tool calls", "turn", 1);
  w.compare_checks = true;  // skipped on a server that cannot count a conversation's tokens
  for (int t = 1; t <= kToolLoopTurns; ++t) w.arms.push_back({.name = std::format("turn {}", t)});
  const int system_tokens = scaled(256, p.scale, 16);
  const int task_tokens = scaled(16, p.scale, 4);
  const int result_tokens = scaled(32, p.scale, 4);
  const int sessions = repetitions(p.reps);
  w.description = std::format(
      "{} agent sessions one after another, {} turns each: a {}-token system prompt with 3 tools (tight schemas), a "
      "{}-token task. Every turn forces one call (tool_choice \"required\", parallel_tool_calls false, max_tokens {}); "
      "the next turn sends back the server's own reply with its tool_calls and a tool message with a fixed {}-token "
      "result. --parallel 1.",
      sessions, kToolLoopTurns, system_tokens, task_tokens, kCallTokens, result_tokens);
  const std::string system = "You are a travel agent. Answer every request with exactly one tool call.\n" +
                             text_of(derive_seed(p.seed, kToolLoop, 0), system_tokens, p.words_per_token);
  const nlohmann::json tools = loop_tools();
  const nlohmann::json forced = {{"tool_choice", "required"}, {"parallel_tool_calls", false}};
  constexpr int kToolsTokens = 220;  // the three schemas as the template renders them (an estimate)
  constexpr int kCallEstimate = 40;  // one call with its markers
  for (int s = 0; s < sessions; ++s) {
    const auto seed = derive_seed(p.seed, kToolLoop, 1, static_cast<std::uint64_t>(s));
    const std::string session = std::format("toolloop-{}", s);
    Transcript planned;
    planned.add("system", system, system_tokens + kToolsTokens);
    planned.add("user", "Task: " + question_of(derive_seed(seed, 1), task_tokens, p.words_per_token), task_tokens);
    int previous = -1;
    for (int turn = 1; turn <= kToolLoopTurns; ++turn) {
      // What the call of the turn before returns, the same bytes for every server.
      const std::string result =
          text_of(derive_seed(seed, 2, static_cast<std::uint64_t>(turn - 1)), result_tokens, p.words_per_token);
      if (turn > 1) {
        // The planned shape only sizes the context: the reply is the server's.
        planned.add("assistant", "<tool_call>…</tool_call>", kCallEstimate);
        planned.add("tool", result, result_tokens);
      }
      Step step = chat_step(std::format("turn {}", turn), session, planned, kCallTokens, turn);
      step.tools = tools;
      step.body_fields = forced;
      if (previous >= 0) {
        step.continues = previous;
        step.after = previous;
        step.tool_result = result;
      }
      w.steps.push_back(std::move(step));
      previous = static_cast<int>(w.steps.size()) - 1;
    }
  }
  // The gates replay a first turn (its messages do not depend on a reply): the last session's.
  w.gate_step = static_cast<int>(w.steps.size()) - kToolLoopTurns;
  return w;
}

}  // namespace prefixd::bench
