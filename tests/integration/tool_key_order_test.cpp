// Tools keep the key order the client sent, end to end on the real server and the generated model's
// own chat template: the prompt holds each tool as Hugging Face's `tojson` writes it; a key set
// with tools through the control plane serves the chat that sends the same tools in the same
// order; and a saved key, loaded into a restarted server, re-renders its tools in that order.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
namespace fs = std::filesystem;

// A tool whose keys are nowhere sorted ("type" before "function", "name" before "description",
// "zeta" before "alpha"), with a non-ASCII character that tojson keeps as it is.
ordered_json unsorted_tools() {
  return ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Météo for a city", "parameters": {"type": "object", "properties": {
      "zeta": {"type": "string", "description": "the city"}, "alpha": {"type": "integer", "minimum": 1}},
      "required": ["zeta", "alpha"]}}}])");
}

// python3 -c 'import json; print(json.dumps(tool, ensure_ascii=False))' for unsorted_tools()[0]:
// the tool as Hugging Face's tojson (and llama-server) renders it.
constexpr std::string_view kToolAsTojson =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Météo for a city", "parameters": )"
    R"({"type": "object", "properties": {"zeta": {"type": "string", "description": "the city"}, "alpha": )"
    R"({"type": "integer", "minimum": 1}}, "required": ["zeta", "alpha"]}}})";

ordered_json forecast_question() {
  return ordered_json::array({{{"role", "system"}, {"content", "You are a weather agent for a travel agency. Be brief."}},
                              {{"role", "user"}, {"content", "Weather in Oslo for three days?"}}});
}

int cached_of(const JsonReply& reply) { return reply.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); }

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("prefixd-tool-order-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(ToolKeyOrder, TheModelsTemplateRendersToolsAndObjectArgumentsAsTojsonDoes) {
  ServerProcess server;
  auto client = server.client();
  ordered_json messages = forecast_question();
  messages.push_back(ordered_json::parse(R"({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
      "type": "function", "function": {"name": "get_weather", "arguments": {"zeta": "Oslo", "alpha": 3}}}]})"));
  messages.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "rain, 9 C"}});
  const auto reply = post_ordered_json(*client, "/apply-template", {{"messages", messages}, {"tools", unsorted_tools()}});
  ASSERT_EQ(reply.status, 200) << reply.raw;
  const std::string prompt = reply.body["prompt"].get<std::string>();
  EXPECT_NE(prompt.find("<tools>\n" + std::string(kToolAsTojson) + "\n</tools>"), std::string::npos) << prompt;
  // json.dumps({"zeta": "Oslo", "alpha": 3}): arguments sent as an object are printed by tojson.
  EXPECT_NE(prompt.find(R"("arguments": {"zeta": "Oslo", "alpha": 3}})"), std::string::npos) << prompt;
}

TEST(ToolKeyOrder, AKeySetWithToolsServesTheChatSendingTheSameToolsInTheSameOrder) {
  ServerProcess server;
  auto client = server.client();
  const auto set = post_ordered_json(*client, "/v1/cache/set",
                                     {{"key", "weather"}, {"messages", forecast_question()}, {"tools", unsorted_tools()}});
  ASSERT_EQ(set.status, 200) << set.raw;
  const int key_tokens = set.body["tokens"].get<int>();
  ASSERT_GT(key_tokens, 0);

  const auto hit = post_ordered_json(*client, "/v1/chat/completions",
                                     {{"messages", forecast_question()}, {"tools", unsorted_tools()}, {"max_tokens", 2}});
  ASSERT_EQ(hit.status, 200) << hit.raw;
  EXPECT_EQ(hit.body["usage"]["prompt_tokens"].get<int>(), key_tokens) << "the chat renders the key's tokens";
  EXPECT_EQ(cached_of(hit), key_tokens - 1) << "all of the stored prefix but the one token sampled from";

  // The same tools with their keys sorted are other tokens from the first tool on: only the text
  // before the tools is reused. (Order is what a template prints, so it is what the cache sees.)
  const ordered_json sorted_tools = ordered_json::parse(json::parse(unsorted_tools().dump()).dump());
  const auto sorted = post_ordered_json(*client, "/v1/chat/completions",
                                        {{"messages", forecast_question()}, {"tools", sorted_tools}, {"max_tokens", 2}});
  ASSERT_EQ(sorted.status, 200) << sorted.raw;
  EXPECT_EQ(sorted.body["usage"]["prompt_tokens"].get<int>(), key_tokens) << "the same tokens, in another order";
  EXPECT_LT(cached_of(sorted), key_tokens / 2) << sorted.raw;
}

TEST(ToolKeyOrder, ASavedKeyReloadsItsToolsInTheOrderSent) {
  TempDir dir;
  const std::vector<std::string> args = {"--cache-artifact-path", (dir.path() / "artifacts").string()};
  int key_tokens = 0;
  {
    ServerProcess server({.extra_args = args});
    auto client = server.client();
    const auto set = post_ordered_json(*client, "/v1/cache/set",
                                       {{"key", "weather"}, {"messages", forecast_question()}, {"tools", unsorted_tools()}});
    ASSERT_EQ(set.status, 200) << set.raw;
    key_tokens = set.body["tokens"].get<int>();
    ASSERT_EQ(post_json(*client, "/v1/cache/save", {{"name", "weather-agent"}, {"key", "weather"}}).status, 200);
  }
  ServerProcess restarted({.extra_args = args});
  auto client = restarted.client();
  const auto loaded = post_json(*client, "/v1/cache/load", {{"name", "weather-agent"}, {"key", "weather"}});
  ASSERT_EQ(loaded.status, 200) << loaded.raw;
  // update re-renders the key's stored conversation (tools from the artifact's manifest) with the
  // new turn: every loaded token matches only when the tools come back in the order sent.
  const auto updated = post_json(*client, "/v1/cache/update",
                                 {{"key", "weather"},
                                  {"messages", json::array({{{"role", "assistant"}, {"content", "Rain, then sun."}},
                                                            {{"role", "user"}, {"content", "And in Bergen?"}}})}});
  ASSERT_EQ(updated.status, 200) << updated.raw;
  EXPECT_GE(updated.body["cached_tokens"].get<int>(), key_tokens) << updated.raw;
  // A chat with the same tools in the same order continues from the reloaded prefix too.
  ordered_json messages = forecast_question();
  messages.push_back({{"role", "assistant"}, {"content", "Rain, then sun."}});
  messages.push_back({{"role", "user"}, {"content", "And in Stavanger?"}});
  const auto hit = post_ordered_json(*client, "/v1/chat/completions",
                                     {{"messages", messages}, {"tools", unsorted_tools()}, {"max_tokens", 2}});
  ASSERT_EQ(hit.status, 200) << hit.raw;
  EXPECT_GE(cached_of(hit), key_tokens) << hit.raw;
}

}  // namespace
}  // namespace prefixd::testing
