// Prompt-processing progress from the real binary (return_progress): after the cache answers and
// after each prefill chunk, in every protocol's own stream, counting what the cache reused; and
// nothing of it unless asked for.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

std::string long_text() {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "The archive keeps letter " + std::to_string(i) + " from the harbour office. ";
  return text;
}

json messages() { return json::array({{{"role", "user"}, {"content", long_text()}}}); }

struct Progress {
  std::vector<json> updates;  // each prompt_progress, in order
  int prompt_tokens = 0;
};

// Checks what every protocol's updates share for a cold prompt.
void expect_progress_shape(const Progress& p, int cached, const std::string& protocol) {
  SCOPED_TRACE(protocol);
  ASSERT_GT(p.prompt_tokens, 0) << "the reply's usage names the prompt's tokens";
  ASSERT_GE(p.updates.size(), 2U) << "once the cache answered, then per prefill chunk";
  EXPECT_EQ(p.updates.front()["processed"], cached) << "the first update comes before any prefill";
  int previous = -1;
  for (const json& u : p.updates) {
    EXPECT_EQ(u["total"], p.prompt_tokens);
    EXPECT_EQ(u["cache"], cached);
    EXPECT_GT(u["processed"].get<int>(), previous) << "each update is further on";
    EXPECT_LE(u["processed"].get<int>(), p.prompt_tokens);
    EXPECT_GE(u["time_ms"].get<double>(), 0.0);
    previous = u["processed"].get<int>();
  }
  // The prompt's last token is computed with the first sampled one, not in a prefill chunk.
  EXPECT_EQ(previous, p.prompt_tokens - 1);
}

Progress chat_progress(httplib::Client& client, bool asked) {
  json body = {{"model", "tiny"}, {"messages", messages()}, {"max_tokens", 2}, {"temperature", 0}, {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (asked) body["return_progress"] = true;
  const auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
  Progress out;
  if (!res || res->status != 200) {
    ADD_FAILURE() << (res ? res->body : "no response");
    return out;
  }
  for (const std::string& payload : sse_payloads(res->body)) {
    if (payload == "[DONE]") continue;
    const json chunk = json::parse(payload);
    if (chunk.contains("prompt_progress")) {
      EXPECT_EQ(chunk["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", nullptr}}));
      out.updates.push_back(chunk["prompt_progress"]);
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) out.prompt_tokens = chunk["usage"]["prompt_tokens"];
  }
  return out;
}

TEST(PromptProgress, AChatStreamReportsEachChunkAndWhatTheCacheGave) {
  ServerProcess server(ServerConfig{.extra_args = {"--batch-size", "64"}});
  auto client = server.client();
  EXPECT_TRUE(chat_progress(*client, false).updates.empty()) << "nothing unless asked for";
  // The same prompt again, asked: the cache gives all but its last token, and nothing is left to
  // prefill, so the one update is the cache's answer.
  const Progress warm = chat_progress(*client, true);
  ASSERT_EQ(warm.updates.size(), 1U);
  EXPECT_EQ(warm.updates[0]["total"], warm.prompt_tokens);
  EXPECT_EQ(warm.updates[0]["cache"], warm.prompt_tokens - 1);
  EXPECT_EQ(warm.updates[0]["processed"], warm.prompt_tokens - 1);
}

TEST(PromptProgress, EveryProtocolCarriesItInItsOwnEvents) {
  ServerProcess server(ServerConfig{.extra_args = {"--batch-size", "64", "--no-cache-prompt"}});
  auto client = server.client();
  const Progress chat = chat_progress(*client, true);
  expect_progress_shape(chat, 0, "chat");
  EXPECT_GE(chat.updates.size(), 4U) << "a cold prompt of " << chat.prompt_tokens << " tokens in chunks of 64";

  // Messages: on ping events, which SDKs skip.
  json body = {{"model", "tiny"}, {"max_tokens", 2}, {"temperature", 0}, {"stream", true}, {"return_progress", true},
               {"messages", messages()}};
  auto res = client->Post("/v1/messages", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  Progress messages_progress;
  for (const auto& [event, data] : sse_events(res->body)) {
    if (data.contains("prompt_progress")) {
      EXPECT_EQ(event, "ping");
      messages_progress.updates.push_back(data["prompt_progress"]);
    }
    if (event == "message_delta") messages_progress.prompt_tokens = data["usage"]["input_tokens"];
  }
  expect_progress_shape(messages_progress, 0, "messages");

  // Responses: on a repeated response.in_progress, before any output item.
  body = {{"model", "tiny"}, {"max_output_tokens", 2}, {"temperature", 0}, {"stream", true}, {"return_progress", true},
          {"input", long_text()}};
  res = client->Post("/v1/responses", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  Progress responses_progress;
  for (const auto& [event, data] : sse_events(res->body)) {
    if (data.contains("prompt_progress")) {
      EXPECT_EQ(event, "response.in_progress");
      EXPECT_EQ(data["response"]["output"], json::array());
      responses_progress.updates.push_back(data["prompt_progress"]);
    }
    if (event == "response.completed" || event == "response.incomplete") responses_progress.prompt_tokens = data["response"]["usage"]["input_tokens"];
  }
  expect_progress_shape(responses_progress, 0, "responses");
}

}  // namespace
}  // namespace prefixd::testing
