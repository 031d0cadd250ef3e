// Tool calls in a complete output: format detection, the recorded outputs of each format, ids,
// canonical arguments and the JSON shapes.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "api/prompt/chat_template.h"
#include "api/tools/tool_calls.h"
#include "modelgen/vocab.h"
#include "tool_call_cases.h"

namespace prefixd::api {
namespace {

using testing::recorded_tool_call_outputs;
using testing::weather_and_time_tools;

TEST(ApiToolCalls, DetectsHermesInPrefixdTemplates) {
  EXPECT_EQ(detect_tool_call_format(modelgen::chat_template()), ToolCallFormat::hermes);
  EXPECT_EQ(detect_tool_call_format(chatml_template_source()), ToolCallFormat::hermes);
}

TEST(ApiToolCalls, DetectsLlama3AndMistralByTheirMarkers) {
  // Shaped like Llama 3.1/3.2 templates: headers, an ipython role, JSON calls with "parameters".
  const std::string llama31 =
      "{{- '<|start_header_id|>system<|end_header_id|>\\n\\nEnvironment: ipython\\n' }}"
      "{%- if builtin_tools %}{{- '<|python_tag|>' + call.name + '.call(' }}{%- endif %}";
  const std::string llama32 =
      "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
      "{{- '{\"name\": \"' + call.name + '\", \"parameters\": ' + call.arguments | tojson + '}' }}";
  EXPECT_EQ(detect_tool_call_format(llama31), ToolCallFormat::llama3);
  EXPECT_EQ(detect_tool_call_format(llama32), ToolCallFormat::llama3);
  EXPECT_EQ(detect_tool_call_format("{{- '[AVAILABLE_TOOLS] ' + tools|tojson + '[/AVAILABLE_TOOLS]' }}"), ToolCallFormat::mistral);
  EXPECT_EQ(detect_tool_call_format("{{- '[TOOL_CALLS]' + call.name + '[ARGS]' + call.arguments }}"), ToolCallFormat::mistral);
  // Llama 3 headers alone (a template without tools) teach no call syntax.
  EXPECT_EQ(detect_tool_call_format("{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content }}"),
            ToolCallFormat::none);
  EXPECT_EQ(detect_tool_call_format("{% for m in messages %}{{ m.content }}{% endfor %}"), ToolCallFormat::none);
}

TEST(ApiToolCalls, RecordedOutputsGiveTheirContentCallsAndWarnings) {
  int checked = 0;
  for (const testing::ToolCallCase& c : recorded_tool_call_outputs()) {
    SCOPED_TRACE(c.label);
    const ParsedAssistant parsed = parse_tool_calls(c.output, c.format, weather_and_time_tools(), ToolCallIdGenerator(7));
    EXPECT_EQ(parsed.content, c.content);
    ASSERT_EQ(parsed.tool_calls.size(), c.calls.size());
    for (std::size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(parsed.tool_calls[i].name, c.calls[i].first);
      EXPECT_EQ(parsed.tool_calls[i].arguments, c.calls[i].second);
      EXPECT_TRUE(nlohmann::json::accept(parsed.tool_calls[i].arguments));
    }
    if (c.warning.empty()) {
      EXPECT_TRUE(parsed.warnings.empty()) << parsed.warnings.front();
    } else {
      ASSERT_FALSE(parsed.warnings.empty());
      EXPECT_NE(parsed.warnings.front().find(c.warning), std::string::npos) << parsed.warnings.front();
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

TEST(ApiToolCalls, WithoutAFormatOrToolsEverythingIsContent) {
  const std::string output = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const ParsedAssistant none = parse_tool_calls(output, ToolCallFormat::none, weather_and_time_tools());
  EXPECT_EQ(none.content, output);
  EXPECT_TRUE(none.tool_calls.empty());
  const ParsedAssistant no_tools = parse_tool_calls(output, ToolCallFormat::hermes, nlohmann::json());
  EXPECT_EQ(no_tools.content, output);
  EXPECT_TRUE(no_tools.tool_calls.empty());
  EXPECT_EQ(no_tools.warnings.size(), 1u);
}

TEST(ApiToolCalls, ToolNamesAcceptBareAndWrappedFunctions) {
  const auto names = tool_names(nlohmann::json::parse(
      R"([{"type": "function", "function": {"name": "a"}}, {"name": "b"}, 3, {"function": {"description": "no name"}}])"));
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(tool_names(nlohmann::json::object()).empty());
}

TEST(ApiToolCalls, IdsAreCallPlus24AlphanumericsAndRepeatForASeed) {
  ToolCallIdGenerator first(42);
  ToolCallIdGenerator second(42);
  ToolCallIdGenerator other(43);
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    const std::string id = first.next();
    ASSERT_EQ(id.size(), 29u);
    EXPECT_TRUE(id.starts_with("call_"));
    for (char ch : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << id;
    EXPECT_EQ(second.next(), id);
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 200u);
  EXPECT_NE(ToolCallIdGenerator(42).next(), other.next());
  EXPECT_NE(ToolCallIdGenerator().next(), ToolCallIdGenerator().next());
}

TEST(ApiToolCalls, ParallelCallsTakeIdsInOrder) {
  const std::string output = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>\n"
                             "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
  const ParsedAssistant parsed = parse_tool_calls(output, ToolCallFormat::hermes, weather_and_time_tools(), ToolCallIdGenerator(9));
  ToolCallIdGenerator ids(9);
  ASSERT_EQ(parsed.tool_calls.size(), 2u);
  EXPECT_EQ(parsed.tool_calls[0].id, ids.next());
  EXPECT_EQ(parsed.tool_calls[1].id, ids.next());
}

TEST(ApiToolCalls, CanonicalArgumentsAreCompactInTheirOriginalOrder) {
  EXPECT_EQ(canonical_arguments(R"({ "zone" : "UTC", "a": [1, 2.50, {"b": null}] })"), R"({"zone":"UTC","a":[1,2.5,{"b":null}]})");
  EXPECT_EQ(canonical_arguments(R"({"city":"Oslo"})"), R"({"city":"Oslo"})");
  EXPECT_EQ(canonical_arguments(R"({"u": "\u00e9t\u00e9"})"), "{\"u\":\"\xc3\xa9t\xc3\xa9\"}");
  EXPECT_EQ(canonical_arguments("{\"city\": Paris}"), "{\"city\": Paris}");
  EXPECT_EQ(canonical_arguments(""), "");
}

TEST(ApiToolCalls, ParsedArgumentsAreTheModelsBytesWhichAPrefixdTemplateRendersBack) {
  // The agent loop's next turn: the client sends the call back unchanged; prefixd's template
  // renders string arguments verbatim, so the assistant turn is the generated text again.
  const std::string generated = "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const ParsedAssistant parsed = parse_tool_calls(generated, ToolCallFormat::hermes, weather_and_time_tools(), ToolCallIdGenerator(1));
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  auto chat = ChatTemplate::create(std::string(modelgen::chat_template()));
  ASSERT_TRUE(chat.has_value()) << chat.error();
  ChatInput input;
  input.add_generation_prompt = false;
  input.messages = nlohmann::json::array(
      {{{"role", "user"}, {"content", "Weather?"}},
       {{"role", "assistant"}, {"content", parsed.content}, {"tool_calls", nlohmann::json::parse(tool_calls_json(parsed.tool_calls).dump())}}});
  const auto rendered = chat->render(input);
  ASSERT_TRUE(rendered.has_value()) << rendered.error();
  EXPECT_NE(rendered->find("<|im_start|>assistant\n" + generated + "<|im_end|>"), std::string::npos) << *rendered;
}

TEST(ApiToolCalls, ToolCallsJsonHasOpenAIsShape) {
  const auto body = tool_calls_json({{.id = "call_x", .name = "get_time", .arguments = "{}"}});
  EXPECT_EQ(body.dump(), R"([{"id":"call_x","type":"function","function":{"name":"get_time","arguments":"{}"}}])");
}

}  // namespace
}  // namespace prefixd::api
