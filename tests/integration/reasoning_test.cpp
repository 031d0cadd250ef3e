// A chat template that has the model think (--chat-template-file): the reply's reasoning reaches
// each protocol in its own shape — Chat Completions' reasoning_content, a Messages thinking block,
// a Responses reasoning item — streamed and whole, apart from the answer. The tiny random model
// never closes its block, so with thinking on the whole reply is reasoning; with it off the
// template closes the block and the whole reply is the answer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// ChatML, with Qwen3's reasoning switch: the generation prompt opens <think> unless
// enable_thinking is false, and a reply's reasoning is rendered back inside the block.
constexpr const char* kThinkingTemplate = R"tmpl({%- for message in messages %}
{{- '<|im_start|>' + message.role + '\n' }}
{%- if message.role == 'assistant' and message.reasoning_content is defined and message.reasoning_content %}
{{- '<think>\n' + message.reasoning_content + '\n</think>\n\n' }}
{%- endif %}
{{- (message.content if message.content is string else '') + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}
{{- '<think>\n\n</think>\n\n' }}
{%- else %}
{{- '<think>\n' }}
{%- endif %}
{%- endif %}
)tmpl";

class ThinkingServer {
 public:
  ThinkingServer() : path_(fs::temp_directory_path() / ("prefixd-think-" + std::to_string(::getpid()) + ".jinja")) {
    std::ofstream(path_) << kThinkingTemplate;
    server_ = std::make_unique<ServerProcess>(ServerConfig{.extra_args = {"--chat-template-file", path_.string()}});
  }
  ~ThinkingServer() { fs::remove(path_); }
  ServerProcess& server() { return *server_; }

 private:
  fs::path path_;
  std::unique_ptr<ServerProcess> server_;
};

const json kUser = json::array({{{"role", "user"}, {"content", "Is it going to rain in Oslo tomorrow?"}}});

TEST(Reasoning, EachProtocolSendsTheReasoningApartFromTheAnswer) {
  ThinkingServer thinking;
  auto client = thinking.server().client();
  ASSERT_NE(thinking.server().log().find("reasoning: the chat template has the model think"), std::string::npos)
      << thinking.server().log();

  // Chat Completions, whole: the reply is in the open block, so all of it is reasoning.
  const json chat = {{"model", "tiny"}, {"messages", kUser}, {"max_tokens", 6}, {"temperature", 0}};
  const auto whole = post_json(*client, "/v1/chat/completions", chat);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  const json& message = whole.body["choices"][0]["message"];
  ASSERT_TRUE(message.contains("reasoning_content")) << whole.raw;
  EXPECT_FALSE(message["reasoning_content"].get<std::string>().empty());
  EXPECT_EQ(message["content"], "") << whole.raw;
  // With thinking off the template closes the block: all answer, no reasoning.
  json off = chat;
  off["chat_template_kwargs"] = {{"enable_thinking", false}};
  const auto answer = post_json(*client, "/v1/chat/completions", off);
  ASSERT_EQ(answer.status, 200) << answer.raw;
  EXPECT_FALSE(answer.body["choices"][0]["message"].contains("reasoning_content")) << answer.raw;
  EXPECT_FALSE(answer.body["choices"][0]["message"]["content"].get<std::string>().empty()) << answer.raw;

  // Chat Completions, streamed: reasoning_content deltas, no content.
  json streamed = chat;
  streamed["stream"] = true;
  auto stream = client->Post("/v1/chat/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(stream && stream->status == 200);
  std::string reasoning, content;
  for (const std::string& payload : sse_payloads(stream->body)) {
    if (payload == "[DONE]") continue;
    const json delta = json::parse(payload)["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_FALSE(reasoning.empty()) << stream->body;
  EXPECT_EQ(content, "") << stream->body;

  // Messages: a thinking block, whole and as thinking_delta events closed by a signature.
  const json messages = {{"model", "tiny"}, {"max_tokens", 6}, {"temperature", 0}, {"messages", kUser}};
  const auto reply = post_json(*client, "/v1/messages", messages);
  ASSERT_EQ(reply.status, 200) << reply.raw;
  ASSERT_FALSE(reply.body["content"].empty()) << reply.raw;
  EXPECT_EQ(reply.body["content"][0]["type"], "thinking") << reply.raw;
  EXPECT_FALSE(reply.body["content"][0]["thinking"].get<std::string>().empty());
  EXPECT_TRUE(reply.body["content"][0].contains("signature"));
  json messages_stream = messages;
  messages_stream["stream"] = true;
  auto events = client->Post("/v1/messages", messages_stream.dump(), "application/json");
  ASSERT_TRUE(events && events->status == 200);
  std::vector<std::string> sequence;
  std::string thought;
  for (const auto& [name, data] : sse_events(events->body)) {
    if (name == "content_block_start") sequence.push_back("start:" + data["content_block"]["type"].get<std::string>());
    if (name == "content_block_delta") {
      const std::string type = data["delta"]["type"];
      if (sequence.empty() || sequence.back() != "delta:" + type) sequence.push_back("delta:" + type);
      if (type == "thinking_delta") thought += data["delta"]["thinking"].get<std::string>();
    }
    if (name == "content_block_stop") sequence.push_back("stop");
  }
  EXPECT_EQ(sequence, (std::vector<std::string>{"start:thinking", "delta:thinking_delta", "delta:signature_delta", "stop"}))
      << events->body;
  EXPECT_FALSE(thought.empty());

  // Responses: a reasoning item before the (empty) message, whole and streamed.
  const json responses = {{"model", "tiny"}, {"input", "Is it going to rain in Oslo tomorrow?"}, {"max_output_tokens", 6},
                          {"temperature", 0}};
  const auto response = post_json(*client, "/v1/responses", responses);
  ASSERT_EQ(response.status, 200) << response.raw;
  const json& output = response.body["output"];
  ASSERT_EQ(output.size(), 2u) << response.raw;
  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_EQ(output[0]["content"][0]["type"], "reasoning_text");
  EXPECT_FALSE(output[0]["content"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(output[1]["type"], "message");
  const std::string message_id = output[1]["id"];
  json responses_stream = responses;
  responses_stream["stream"] = true;
  auto response_events = client->Post("/v1/responses", responses_stream.dump(), "application/json");
  ASSERT_TRUE(response_events && response_events->status == 200);
  std::string reasoning_text;
  json completed;
  for (const auto& [name, data] : sse_events(response_events->body)) {
    if (name == "response.reasoning_text.delta") reasoning_text += data["delta"].get<std::string>();
    if (name == "response.completed" || name == "response.incomplete") completed = data["response"];
  }
  EXPECT_FALSE(reasoning_text.empty()) << response_events->body;
  ASSERT_EQ(completed["output"].size(), 2u) << response_events->body;
  EXPECT_EQ(completed["output"][0]["type"], "reasoning");
  EXPECT_EQ(completed["output"][0]["content"][0]["text"], reasoning_text);
  EXPECT_TRUE(completed["output"][1]["id"].get<std::string>().starts_with("msg_"));
  EXPECT_EQ(completed["output"][1]["id"].get<std::string>().find('_', 4), std::string::npos) << "msg_X, as a whole reply names it";
}

TEST(Reasoning, ATemplateThatDoesNotParseStopsTheServerWithAMessage) {
  const fs::path path = fs::temp_directory_path() / ("prefixd-bad-template-" + std::to_string(::getpid()) + ".jinja");
  std::ofstream(path) << "{% for m in messages %}{{ m.content ";
  try {
    ServerProcess server({.extra_args = {"--chat-template-file", path.string()}});
    ADD_FAILURE() << "the server started with a template that does not parse";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("the chat template does not parse"), std::string::npos) << e.what();
  }
  fs::remove(path);
  try {
    ServerProcess server({.extra_args = {"--chat-template-file", (path.string() + ".missing")}});
    ADD_FAILURE() << "the server started without its template file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--chat-template-file: cannot read"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace prefixd::testing
