// POST /v1/responses end to end on the tiny generated model: the response object and its event
// stream, previous_response_id continuing a stored conversation from the cache, stored responses
// read and deleted per tenant, function calls, and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

const std::string kInstructions = "You are a weather agent. Answer every question about the weather briefly.";
const std::string kQuestion = "What will the weather be like in Rome and Lima for the rest of this week?";

JsonReply respond(httplib::Client& client, const json& body) { return post_json(client, "/v1/responses", body); }

// A Messages reply's whole prompt: what it read, created and computed.
int total_prompt(const json& usage) {
  return usage["input_tokens"].get<int>() + usage["cache_read_input_tokens"].get<int>() +
         usage["cache_creation_input_tokens"].get<int>();
}

TEST(ResponsesApi, AContinuationByIdSendsOnlyTheNewInputAndReadsTheRestFromTheCache) {
  ServerProcess server;
  auto client = server.client();
  const auto first = respond(*client, {{"instructions", kInstructions}, {"input", kQuestion}, {"max_output_tokens", 6},
                                       {"temperature", 0}, {"prompt_cache_key", "ann"}});
  ASSERT_EQ(first.status, 200) << first.raw;
  const json& body = first.body;
  EXPECT_TRUE(body["id"].get<std::string>().starts_with("resp_"));
  EXPECT_EQ(body["object"], "response");
  EXPECT_TRUE(body["status"] == "completed" || body["status"] == "incomplete") << first.raw;
  ASSERT_EQ(body["output"][0]["type"], "message");
  const std::string answer = body["output"][0]["content"][0]["text"];
  const int first_prompt = body["usage"]["input_tokens"].get<int>();
  EXPECT_EQ(body["usage"]["total_tokens"], first_prompt + body["usage"]["output_tokens"].get<int>());

  const auto next = respond(*client, {{"instructions", kInstructions}, {"previous_response_id", body["id"]},
                                      {"input", "And tomorrow?"}, {"max_output_tokens", 4}, {"temperature", 0},
                                      {"prompt_cache_key", "ann"}});
  ASSERT_EQ(next.status, 200) << next.raw;
  EXPECT_EQ(next.body["previous_response_id"], body["id"]);
  // The prompt is the whole conversation, the reply included; all of the first prompt is read back.
  const int cached = next.body["usage"]["input_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GE(cached, first_prompt) << next.raw;
  EXPECT_EQ(cached, next.body["prompt_cache"]["cached_tokens"]);
  // It is exactly the conversation a chat completion renders.
  const auto tokens = post_json(*client, "/tokenize",
                                {{"messages", json::array({{{"role", "system"}, {"content", kInstructions}},
                                                           {{"role", "user"}, {"content", kQuestion}},
                                                           {{"role", "assistant"}, {"content", answer}},
                                                           {{"role", "user"}, {"content", "And tomorrow?"}}})}});
  ASSERT_EQ(tokens.status, 200) << tokens.raw;
  EXPECT_EQ(next.body["usage"]["input_tokens"], tokens.body["tokens"].size());

  // Stored responses: read back, then deleted; a continuation of a deleted one is a 404.
  const auto stored = client->Get("/v1/responses/" + body["id"].get<std::string>());
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->status, 200);
  EXPECT_EQ(json::parse(stored->body)["output"], body["output"]);
  const auto deleted = client->Delete("/v1/responses/" + body["id"].get<std::string>());
  ASSERT_TRUE(deleted);
  EXPECT_EQ(json::parse(deleted->body), json({{"id", body["id"]}, {"object", "response"}, {"deleted", true}}));
  const auto gone = respond(*client, {{"previous_response_id", body["id"]}, {"input", "x"}, {"max_output_tokens", 1}});
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(gone.body["error"]["param"], "previous_response_id");
  // store: false keeps nothing.
  const auto unstored = respond(*client, {{"input", "x"}, {"max_output_tokens", 1}, {"store", false}});
  ASSERT_EQ(unstored.status, 200);
  const auto missing = client->Get("/v1/responses/" + unstored.body["id"].get<std::string>());
  EXPECT_EQ(missing->status, 404);
}

TEST(ResponsesApi, TheEventStreamAssemblesTheSameResponse) {
  ServerProcess server;
  auto client = server.client();
  const json request = {{"instructions", kInstructions}, {"input", kQuestion}, {"max_output_tokens", 8}, {"temperature", 0}};
  const auto whole = respond(*client, request);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  json streamed_request = request;
  streamed_request["stream"] = true;
  const auto streamed = client->Post("/v1/responses", streamed_request.dump(), "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200);
  std::vector<std::string> names;
  std::string text;
  json final_response;
  std::int64_t sequence = 0;
  for (const auto& [name, data] : sse_events(streamed->body)) {
    EXPECT_EQ(data["type"], name);
    EXPECT_EQ(data["sequence_number"], sequence++);
    if (names.empty() || names.back() != name) names.push_back(name);
    if (name == "response.output_text.delta") text += data["delta"].get<std::string>();
    if (name == "response.completed" || name == "response.incomplete") final_response = data["response"];
  }
  const std::string end = whole.body["status"] == "completed" ? "response.completed" : "response.incomplete";
  EXPECT_EQ(names, (std::vector<std::string>{"response.created", "response.in_progress", "response.output_item.added",
                                             "response.content_part.added", "response.output_text.delta",
                                             "response.output_text.done", "response.content_part.done",
                                             "response.output_item.done", end}));
  EXPECT_EQ(text, whole.body["output"][0]["content"][0]["text"].get<std::string>());
  EXPECT_EQ(final_response["output"][0]["content"], whole.body["output"][0]["content"]);
  EXPECT_EQ(final_response["usage"]["output_tokens"], whole.body["usage"]["output_tokens"]);
  // A streamed response is stored as well.
  const auto stored = client->Get("/v1/responses/" + final_response["id"].get<std::string>());
  EXPECT_EQ(stored->status, 200);
}

TEST(ResponsesApi, AFunctionCallLoopByIdFeedsOnlyTheOutputAndItsScaffolding) {
  ServerProcess server({.ctx_size = 4096});
  auto client = server.client();
  const json tools = json::parse(R"([{"type": "function", "name": "get_weather", "parameters": {
      "type": "object", "properties": {"city": {"type": "string", "enum": ["Oslo", "Rome", "Lima"]}},
      "required": ["city"], "additionalProperties": false}}])");
  json previous = nullptr;
  json input = "Weather in Oslo?";
  for (int turn = 0; turn < 3; ++turn) {
    json request = {{"instructions", kInstructions}, {"input", input}, {"tools", tools}, {"tool_choice", "required"},
                    {"parallel_tool_calls", false}, {"max_output_tokens", 100}, {"prompt_cache_key", "agent"}};
    if (!previous.is_null()) request["previous_response_id"] = previous;
    const auto reply = respond(*client, request);
    ASSERT_EQ(reply.status, 200) << reply.raw;
    const json& output = reply.body["output"];
    const auto call = std::ranges::find_if(output, [](const json& item) { return item["type"] == "function_call"; });
    ASSERT_NE(call, output.end()) << reply.raw;
    EXPECT_EQ((*call)["name"], "get_weather");
    EXPECT_TRUE(json::parse((*call)["arguments"].get<std::string>())["city"].is_string());
    if (turn > 0) {
      const int fed = reply.body["prompt_cache"]["fed_tokens"].get<int>();
      EXPECT_LT(fed, 40) << "turn " << turn << ": " << reply.raw;
    }
    previous = reply.body["id"];
    input = json::array({{{"type", "function_call_output"}, {"call_id", (*call)["call_id"]}, {"output", "rain, 9 C"}}});
  }
}

TEST(ResponsesApi, StoredResponsesBelongToTheirTenant) {
  char path[] = "/tmp/prefixd-responses-keys-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream keys(path);
    keys << "sk-alpha-key alpha\nsk-beta-key beta\n";
  }
  ServerProcess server({.extra_args = {"--api-keys", path}});
  auto a = server.client("sk-alpha-key");
  auto b = server.client("sk-beta-key");
  const auto made = respond(*a, {{"input", "hello"}, {"max_output_tokens", 2}});
  ASSERT_EQ(made.status, 200) << made.raw;
  const std::string id = made.body["id"];
  EXPECT_EQ(a->Get("/v1/responses/" + id)->status, 200);
  EXPECT_EQ(b->Get("/v1/responses/" + id)->status, 404);
  EXPECT_EQ(b->Delete("/v1/responses/" + id)->status, 404);
  EXPECT_EQ(respond(*b, {{"previous_response_id", id}, {"input", "x"}, {"max_output_tokens", 1}}).status, 404);
  EXPECT_EQ(a->Get("/v1/responses/" + id)->status, 200);
  ::unlink(path);
}

// One conversation carried by each wire protocol in turn: every reply's own count of reused
// tokens, /v1/cache/stats and /metrics agree after each request, and each turn reuses the last.
TEST(ResponsesApi, EveryAdaptersCountsAgreeWithStatsAndMetrics) {
  ServerProcess server;
  auto client = server.client();
  std::int64_t reused = 0;
  int requests = 0;
  const auto check = [&](const std::string& via, int cached) {
    reused += cached;
    ++requests;
    const json stats = get_json(*client, "/v1/cache/stats").body;
    const auto metrics = client->Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(stats["tokens_reused"], reused) << via;
    EXPECT_EQ(metric_value(metrics->body, "prefixd_prompt_cache_prefix_tokens_reused_total"), static_cast<double>(reused)) << via;
    int outcomes = 0;
    for (const auto& [name, count] : stats["outcomes"].items()) outcomes += count.get<int>();
    EXPECT_EQ(outcomes, requests) << via;
  };
  json history = json::array({{{"role", "user"}, {"content", kQuestion}}});
  const auto chat = post_json(*client, "/v1/chat/completions",
                              {{"messages", json::array({{{"role", "system"}, {"content", kInstructions}}, history[0]})},
                               {"max_tokens", 3}, {"temperature", 0}, {"user", "u"}});
  ASSERT_EQ(chat.status, 200) << chat.raw;
  check("chat", chat.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>());
  history.push_back({{"role", "assistant"}, {"content", chat.body["choices"][0]["message"]["content"]}});
  history.push_back({{"role", "user"}, {"content", "And in Oslo?"}});
  const auto message = post_json(*client, "/v1/messages", {{"model", "tiny"}, {"system", kInstructions}, {"messages", history},
                                                           {"max_tokens", 3}, {"temperature", 0}, {"metadata", {{"user_id", "u"}}}});
  ASSERT_EQ(message.status, 200) << message.raw;
  EXPECT_GT(message.body["usage"]["cache_read_input_tokens"].get<int>(), chat.body["usage"]["prompt_tokens"].get<int>() - 2);
  check("messages", message.body["usage"]["cache_read_input_tokens"].get<int>());
  json input = history;
  input.push_back({{"role", "assistant"}, {"content", message.body["content"][0]["text"]}});
  input.push_back({{"role", "user"}, {"content", "And in Lima?"}});
  const auto response = respond(*client, {{"instructions", kInstructions}, {"input", input}, {"max_output_tokens", 3},
                                          {"temperature", 0}, {"user", "u"}});
  ASSERT_EQ(response.status, 200) << response.raw;
  EXPECT_GT(response.body["usage"]["input_tokens_details"]["cached_tokens"].get<int>(),
            total_prompt(message.body["usage"]) - 2) << response.raw;
  check("responses", response.body["usage"]["input_tokens_details"]["cached_tokens"].get<int>());
}

}  // namespace
}  // namespace prefixd::testing
