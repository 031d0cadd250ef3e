// Tool calls in streamed output: what is held back and released, OpenAI's delta shape, and the
// equivalence with the complete parser over many random cuts of the recorded outputs.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "api/tools/tool_call_stream.h"
#include "tool_call_cases.h"

namespace prefixd::api {
namespace {

using testing::recorded_tool_call_outputs;
using testing::weather_and_time_tools;
using Delivery = ToolCallStream::ArgumentDelivery;

// What a stream emitted, assembled as a client would.
struct Assembled {
  std::string content;
  std::vector<ToolCall> calls;
  std::size_t argument_deltas = 0;  // deltas that carried arguments text
  ToolCallStreamEnd end;
};

void assemble(const std::vector<AssistantDelta>& deltas, Assembled& out) {
  for (const AssistantDelta& delta : deltas) {
    if (!delta.tool_call) {
      EXPECT_FALSE(delta.content.empty());
      out.content += delta.content;
      continue;
    }
    const ToolCallDelta& call = *delta.tool_call;
    if (call.id) {
      ASSERT_EQ(call.index, out.calls.size()) << "a call's first delta carries its id, in order";
      ASSERT_TRUE(call.name.has_value());
      out.calls.push_back({.id = *call.id, .name = *call.name});
    } else {
      ASSERT_LT(call.index, out.calls.size());
      EXPECT_FALSE(call.name.has_value());
    }
    if (!call.arguments.empty()) ++out.argument_deltas;
    out.calls[call.index].arguments += call.arguments;
  }
}

Assembled stream_pieces(const testing::ToolCallCase& c, const std::vector<std::string>& pieces, Delivery delivery) {
  ToolCallStream stream(c.format, weather_and_time_tools(), ToolCallIdGenerator(7), delivery);
  Assembled out;
  for (const std::string& piece : pieces) assemble(stream.feed(piece), out);
  out.end = stream.finish();
  assemble(out.end.deltas, out);
  return out;
}

// Cuts `text` into pieces of 0 to 6 bytes (empty pieces included: a token may decode to nothing).
std::vector<std::string> random_cut(const std::string& text, std::mt19937& random) {
  std::vector<std::string> pieces;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t size = std::min<std::size_t>(random() % 7, text.size() - at);
    pieces.push_back(text.substr(at, size));
    at += size;
  }
  return pieces;
}

TEST(ApiToolCallStream, EveryCutOfEveryRecordedOutputMatchesTheCompleteParser) {
  std::mt19937 random(20261201);
  std::size_t cuts_inside_a_marker = 0, calls_in_several_argument_deltas = 0, cases_checked = 0;
  for (const testing::ToolCallCase& c : recorded_tool_call_outputs()) {
    SCOPED_TRACE(c.label);
    const ParsedAssistant whole = parse_tool_calls(c.output, c.format, weather_and_time_tools(), ToolCallIdGenerator(7));
    for (Delivery delivery : {Delivery::whole_call, Delivery::as_generated}) {
      if (delivery == Delivery::as_generated && !c.clean_for_streaming) continue;
      ++cases_checked;
      for (int round = 0; round < 150; ++round) {
        const std::vector<std::string> pieces = random_cut(c.output, random);
        const Assembled got = stream_pieces(c, pieces, delivery);
        ASSERT_EQ(got.content, whole.content) << "round " << round;
        ASSERT_EQ(got.calls, whole.tool_calls) << "round " << round;
        ASSERT_EQ(got.end.warnings, whole.warnings) << "round " << round;
        ASSERT_EQ(got.end.called_tools, !whole.tool_calls.empty());
        ASSERT_EQ(got.end.broken_calls, 0u);
        if (delivery == Delivery::as_generated && got.argument_deltas > got.calls.size()) ++calls_in_several_argument_deltas;
        // A cut strictly inside "<tool_call>", "<|python_tag|>" or "[TOOL_CALLS]".
        std::size_t at = 0;
        for (const std::string& piece : pieces) {
          at += piece.size();
          for (std::string_view marker : {"<tool_call>", "<|python_tag|>", "[TOOL_CALLS]"}) {
            for (std::size_t k = 1; k < marker.size() && k <= at; ++k) {
              if (std::string_view(c.output).substr(at - k, marker.size()) == marker) ++cuts_inside_a_marker;
            }
          }
        }
      }
    }
  }
  EXPECT_GE(cases_checked, 50u);
  EXPECT_GT(cuts_inside_a_marker, 1000u);
  EXPECT_GT(calls_in_several_argument_deltas, 1000u);
}

TEST(ApiToolCallStream, ContentIsReleasedUpToAPossibleMarker) {
  ToolCallStream stream(ToolCallFormat::hermes, weather_and_time_tools(), ToolCallIdGenerator(1));
  EXPECT_EQ(stream.feed("Hello wor"), (std::vector<AssistantDelta>{{.content = "Hello wor"}}));
  EXPECT_EQ(stream.feed("ld.\n<tool_"), (std::vector<AssistantDelta>{{.content = "ld."}}));
  EXPECT_TRUE(stream.feed("call>\n{\"name\": \"get_ti").empty());
  const std::vector<AssistantDelta> first = stream.feed("me\", \"arguments\": {\"zo");
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(first[0].tool_call.has_value());
  ToolCallIdGenerator ids(1);
  EXPECT_EQ(*first[0].tool_call, (ToolCallDelta{.index = 0, .id = ids.next(), .name = "get_time", .arguments = "{\"zo"}));
  EXPECT_EQ(stream.feed("ne\": 1}}\n</tool_call>"),
            (std::vector<AssistantDelta>{{.tool_call = ToolCallDelta{.index = 0, .arguments = "ne\": 1}"}}}));
  const ToolCallStreamEnd end = stream.finish();
  EXPECT_TRUE(end.deltas.empty());
  EXPECT_TRUE(end.called_tools);
  EXPECT_TRUE(end.warnings.empty());
}

TEST(ApiToolCallStream, ANonMarkerIsReleasedAtTheFirstByteThatRulesItOut) {
  ToolCallStream stream(ToolCallFormat::hermes, weather_and_time_tools(), ToolCallIdGenerator(1));
  EXPECT_TRUE(stream.feed("<tool").empty());
  EXPECT_EQ(stream.feed("s> <"), (std::vector<AssistantDelta>{{.content = "<tools>"}}));
  const ToolCallStreamEnd end = stream.finish();
  EXPECT_EQ(end.deltas, (std::vector<AssistantDelta>{{.content = " <"}}));
  EXPECT_FALSE(end.called_tools);
  ASSERT_EQ(end.warnings.size(), 1u);
}

TEST(ApiToolCallStream, ANameLongerThanEveryToolIsReleasedBeforeItEnds) {
  ToolCallStream stream(ToolCallFormat::hermes, weather_and_time_tools(), ToolCallIdGenerator(1));
  EXPECT_EQ(stream.feed(R"(<tool_call>{"name": "get_weather_forecast)"),
            (std::vector<AssistantDelta>{{.content = R"(<tool_call>{"name": "get_weather_forecast)"}}));
  const ToolCallStreamEnd end = stream.finish();
  EXPECT_FALSE(end.called_tools);
  ASSERT_EQ(end.warnings.size(), 1u);
  EXPECT_NE(end.warnings[0].find("get_weather_..."), std::string::npos) << end.warnings[0];
}

TEST(ApiToolCallStream, WholeCallModeHoldsACallUntilItsArgumentsAreComplete) {
  ToolCallStream stream(ToolCallFormat::mistral, weather_and_time_tools(), ToolCallIdGenerator(1), Delivery::whole_call);
  EXPECT_TRUE(stream.feed("[TOOL_CALLS]get_time[ARGS]{\"zone\": \"U").empty());
  const std::vector<AssistantDelta> done = stream.feed("TC\"}");
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tool_call->arguments, "{\"zone\": \"UTC\"}");
  EXPECT_EQ(done[0].tool_call->name, "get_time");
}

TEST(ApiToolCallStream, ACallCutOffAfterItWasSentIsReportedBroken) {
  for (const testing::ToolCallCase& c : recorded_tool_call_outputs()) {
    if (c.clean_for_streaming) continue;
    SCOPED_TRACE(c.label);
    const Assembled got = stream_pieces(c, {c.output}, Delivery::as_generated);
    ASSERT_EQ(got.calls.size(), 1u);
    EXPECT_EQ(got.calls[0].name, "get_weather");
    EXPECT_TRUE(c.output.find(got.calls[0].arguments) != std::string::npos);
    EXPECT_TRUE(got.end.called_tools);
    EXPECT_EQ(got.end.broken_calls, 1u);
    ASSERT_FALSE(got.end.warnings.empty());
    EXPECT_NE(got.end.warnings.back().find("sent"), std::string::npos) << got.end.warnings.back();
  }
}

TEST(ApiToolCallStream, DeltaJsonHasOpenAIsShape) {
  EXPECT_EQ(tool_call_delta_json({.index = 1, .id = "call_a", .name = "get_time", .arguments = ""}).dump(),
            R"({"index":1,"id":"call_a","type":"function","function":{"name":"get_time","arguments":""}})");
  EXPECT_EQ(tool_call_delta_json({.index = 1, .arguments = "{\"z"}).dump(), R"({"index":1,"function":{"arguments":"{\"z"}})");
}

}  // namespace
}  // namespace prefixd::api
