// Recorded model outputs with tool calls, and what the parser must make of them: shared by the
// complete-output tests and the streaming tests (which cut each output at random places).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/tools/tool_calls.h"

namespace prefixd::api::testing {

inline nlohmann::json weather_and_time_tools() {
  return nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}])");
}

struct ToolCallCase {
  std::string label;
  ToolCallFormat format;
  std::string output;
  std::string content;                                      // expected content
  std::vector<std::pair<std::string, std::string>> calls;   // expected (name, arguments)
  std::string warning;  // a word of the expected warning; empty: no warning at all
  // Every call starts and ends well: streaming with arguments as generated gives the same result.
  bool clean_for_streaming = true;
};

inline std::vector<ToolCallCase> recorded_tool_call_outputs() {
  using F = ToolCallFormat;
  const std::string weather_paris = R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}})";
  const std::string time_cet = R"({"name": "get_time", "arguments": {"zone": "CET"}})";
  return {
      {"hermes single", F::hermes, "<tool_call>\n" + weather_paris + "\n</tool_call>", "",
       {{"get_weather", R"({"city": "Paris", "unit": "c"})"}}, ""},
      {"hermes text then two calls", F::hermes,
       "Let me check both.\n<tool_call>\n" + weather_paris + "\n</tool_call>\n<tool_call>\n" + time_cet + "\n</tool_call>",
       "Let me check both.", {{"get_weather", R"({"city": "Paris", "unit": "c"})"}, {"get_time", R"({"zone": "CET"})"}}, ""},
      {"hermes text after", F::hermes, "<tool_call>" + time_cet + "</tool_call>\n\nDone.", "Done.",
       {{"get_time", R"({"zone": "CET"})"}}, ""},
      {"hermes compact, spaces around", F::hermes,
       R"(  <tool_call>{"name":"get_weather","arguments":{"city":"Oslo"}}</tool_call>  )", "",
       {{"get_weather", R"({"city":"Oslo"})"}}, ""},
      {"hermes loose whitespace", F::hermes,
       "\r\n<tool_call>\n  {  \"name\" : \"get_time\" ,\n \"arguments\" : { \"zone\" : \"UTC\" } }\n\n</tool_call>\n", "",
       {{"get_time", R"({ "zone" : "UTC" })"}}, ""},
      {"hermes nested arguments", F::hermes,
       R"(<tool_call>{"name": "get_weather", "arguments": {"q": "a \"b\" } <tool_call>", "n": -1.5e3, "l": [0, {"x": null}], "ok": true, "u": "\u00e9"}}</tool_call>)",
       "", {{"get_weather", R"({"q": "a \"b\" } <tool_call>", "n": -1.5e3, "l": [0, {"x": null}], "ok": true, "u": "\u00e9"})"}}, ""},
      {"hermes truncated mid-JSON", F::hermes, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
       "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", {}, "ends inside", false},
      {"hermes truncated before the name", F::hermes, "<tool_call>\n{\"name\": \"get_wea",
       "<tool_call>\n{\"name\": \"get_wea", {}, "ends inside"},
      {"hermes invalid JSON", F::hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": Paris}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": Paris}}\n</tool_call>", {}, "not valid JSON", false},
      {"hermes unknown function", F::hermes, "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>", {}, "unknown function"},
      {"hermes valid then unknown", F::hermes,
       "<tool_call>\n" + time_cet + "\n</tool_call>\n<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>", {{"get_time", R"({"zone": "CET"})"}},
       "unknown function"},
      {"hermes not closed", F::hermes, "<tool_call>\n" + time_cet + "\nDone", "Done", {{"get_time", R"({"zone": "CET"})"}},
       "not closed"},
      {"hermes marker after a lone <", F::hermes, "a <<tool_call>" + time_cet + "</tool_call>", "a <",
       {{"get_time", R"({"zone": "CET"})"}}, ""},
      {"hermes marker inside a failed call", F::hermes, "<tool_call><tool_call>" + time_cet + "</tool_call>", "<tool_call>",
       {{"get_time", R"({"zone": "CET"})"}}, "expected a JSON object"},
      {"hermes extra member and no arguments key", F::hermes,
       "<tool_call>{\"name\": \"get_time\", \"arguments\": {}, \"why\": [1]}</tool_call> <tool_call>{\"name\": \"get_time\"}</tool_call>",
       "<tool_call>{\"name\": \"get_time\"}</tool_call>", {{"get_time", "{}"}}, "expected ','"},
      {"hermes no call", F::hermes, "Hello <world> [x] {\"a\": 1}\n", "Hello <world> [x] {\"a\": 1}\n", {}, ""},
      {"hermes marker prefix at the end", F::hermes, "Almost <tool_", "Almost <tool_", {}, "start of a tool call marker"},
      {"hermes long unknown name", F::hermes, "<tool_call>{\"name\": \"get_weather_forecast_for_a_week\", \"arguments\": {}}</tool_call>",
       "<tool_call>{\"name\": \"get_weather_forecast_for_a_week\", \"arguments\": {}}</tool_call>", {}, "unknown function"},
      {"hermes name not first", F::hermes, "<tool_call>{\"arguments\": {}, \"name\": \"get_time\"}</tool_call>",
       "<tool_call>{\"arguments\": {}, \"name\": \"get_time\"}</tool_call>", {}, "does not start with"},

      {"llama3 bare", F::llama3, R"({"name": "get_weather", "parameters": {"city": "Rome"}})", "",
       {{"get_weather", R"({"city": "Rome"})"}}, ""},
      {"llama3 python tag", F::llama3, R"(<|python_tag|>{"name": "get_time", "parameters": {"zone": "PST"}})", "",
       {{"get_time", R"({"zone": "PST"})"}}, ""},
      {"llama3 two calls with ;", F::llama3,
       R"({"name": "get_weather", "parameters": {"city": "Rome"}}; {"name": "get_time", "parameters": {"zone": "CET"}})", "",
       {{"get_weather", R"({"city": "Rome"})"}, {"get_time", R"({"zone": "CET"})"}}, ""},
      {"llama3 two calls on lines", F::llama3,
       "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n{\"name\": \"get_time\", \"parameters\": {}}\n", "",
       {{"get_weather", R"({"city": "Rome"})"}, {"get_time", "{}"}}, ""},
      {"llama3 text then python tag", F::llama3, R"(Checking. <|python_tag|>{"name": "get_time", "parameters": {"zone": "PST"}})",
       "Checking.", {{"get_time", R"({"zone": "PST"})"}}, ""},
      {"llama3 call then text", F::llama3, "{\"name\": \"get_time\", \"parameters\": {}}\nThat is all.", "That is all.",
       {{"get_time", "{}"}}, ""},
      {"llama3 tagged calls with ;", F::llama3,
       R"(<|python_tag|>{"name": "get_time", "parameters": {"zone": "A"}};<|python_tag|>{"name": "get_time", "parameters": {"zone": "B"}})",
       "", {{"get_time", R"({"zone": "A"})"}, {"get_time", R"({"zone": "B"})"}}, ""},
      {"llama3 plain JSON answer", F::llama3, R"({"result": 42})", R"({"result": 42})", {}, "does not start with"},
      {"llama3 builtin tool syntax", F::llama3, R"(<|python_tag|>brave_search.call(query="x"))",
       R"(<|python_tag|>brave_search.call(query="x"))", {}, "expected a JSON object"},
      {"llama3 brace inside text", F::llama3, R"(Use {"name": "get_time"} like this)", R"(Use {"name": "get_time"} like this)",
       {}, ""},
      {"llama3 truncated", F::llama3, R"({"name": "get_weather", "parameters": {"city": )",
       R"({"name": "get_weather", "parameters": {"city": )", {}, "ends inside", false},

      {"mistral array with ids", F::mistral,
       R"([TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Lyon"}, "id": "a1b2c3d4e"}, {"name": "get_time", "arguments": {"zone": "CET"}}])",
       "", {{"get_weather", R"({"city": "Lyon"})"}, {"get_time", R"({"zone": "CET"})"}}, ""},
      {"mistral named form", F::mistral, R"([TOOL_CALLS]get_weather[ARGS]{"city": "Nice"}[TOOL_CALLS]get_time[ARGS]{"zone": "UTC"})",
       "", {{"get_weather", R"({"city": "Nice"})"}, {"get_time", R"({"zone": "UTC"})"}}, ""},
      {"mistral call id", F::mistral, R"([TOOL_CALLS]get_time[CALL_ID]abc123XYZ[ARGS]{"zone":"UTC"})", "",
       {{"get_time", R"({"zone":"UTC"})"}}, ""},
      {"mistral text before", F::mistral, "I will look.\n[TOOL_CALLS][" + time_cet + "]", "I will look.",
       {{"get_time", R"({"zone": "CET"})"}}, ""},
      {"mistral unknown named", F::mistral, R"([TOOL_CALLS]rm_rf[ARGS]{})", R"([TOOL_CALLS]rm_rf[ARGS]{})", {}, "unknown function"},
      {"mistral second element unknown", F::mistral,
       "[TOOL_CALLS][" + time_cet + R"(, {"name": "nope", "arguments": {}}])", R"(, {"name": "nope", "arguments": {}}])",
       {{"get_time", R"({"zone": "CET"})"}}, "unknown function"},
      {"mistral truncated array", F::mistral, R"([TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Ly)",
       R"([TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Ly)", {}, "ends inside", false},
      {"mistral brackets in text", F::mistral, "See [1] and [TOOL] x", "See [1] and [TOOL] x", {}, ""},
  };
}

}  // namespace prefixd::api::testing
