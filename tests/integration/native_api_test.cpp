// llama-server's native API on the real `prefixd serve`: POST /completion (whole and streamed),
// POST /detokenize, GET /props, and the route table's 405 and HEAD answers for them.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

class NativeApi : public ::testing::Test {
 protected:
  // One server for the suite: every test here only reads, or adds cache entries nothing asserts on.
  static void SetUpTestSuite() { server_ = std::make_unique<ServerProcess>(); }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { client_ = server_->client(); }

  static std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<httplib::Client> client_;
};

std::unique_ptr<ServerProcess> NativeApi::server_;

TEST_F(NativeApi, CompletionAnswersInLlamaServersShape) {
  // Longer than the cache's minimum prefix, so that the resend below is a hit.
  std::string story;
  for (int i = 0; i < 12; ++i) story += "Once upon a time there was a river. ";
  const json body = {{"prompt", story}, {"n_predict", 6}, {"temperature", 0}, {"ignore_eos", true},
                     {"n_probs", 2},            {"return_tokens", true}, {"samplers", json::array({"top_k", "temperature"})},
                     {"id_slot", 0}};
  const auto reply = post_json(*client_, "/completion", body);
  ASSERT_EQ(reply.status, 200) << reply.raw;
  const json& r = reply.body;
  EXPECT_TRUE(r["content"].is_string());
  EXPECT_EQ(r["stop"], true);
  EXPECT_EQ(r["tokens_predicted"], 6);
  EXPECT_EQ(r["stop_type"], "limit");
  EXPECT_EQ(r["stopping_word"], "");
  EXPECT_GT(r["tokens_evaluated"].get<int>(), 0);
  EXPECT_TRUE(r["tokens_cached"].is_number_integer());
  EXPECT_EQ(r["model"], "tiny");
  ASSERT_EQ(r["tokens"].size(), 6u) << "return_tokens: the six generated ids";
  ASSERT_EQ(r["completion_probabilities"].size(), 6u);
  std::string joined;
  for (std::size_t i = 0; i < 6; ++i) {
    const json& p = r["completion_probabilities"][i];
    EXPECT_EQ(p["id"], r["tokens"][i]);
    EXPECT_LE(p["logprob"].get<double>(), 0.0);
    EXPECT_EQ(p["top_logprobs"].size(), 2u);
    joined += p["token"].get<std::string>();
  }
  EXPECT_EQ(joined, r["content"].get<std::string>()) << "the pieces make the content";
  EXPECT_EQ(r["timings"]["predicted_n"], 6);

  // The same prompt again, greedy: the same tokens, now from the cache.
  const auto again = post_json(*client_, "/completion", body);
  ASSERT_EQ(again.status, 200) << again.raw;
  EXPECT_EQ(again.body["tokens"], r["tokens"]);
  EXPECT_GT(again.body["tokens_cached"].get<int>(), 0);

  // Without return_tokens or n_probs: no ids and no probabilities.
  const auto plain = post_json(*client_, "/completion", {{"prompt", "Once upon a time"}, {"n_predict", 2}, {"temperature", 0}});
  ASSERT_EQ(plain.status, 200) << plain.raw;
  EXPECT_EQ(plain.body["tokens"], json::array());
  EXPECT_FALSE(plain.body.contains("completion_probabilities"));
}

// llama.vscode asks for a few fields only: each path's value under its last key, a missing one
// left out, and the rest of the answer dropped.
TEST_F(NativeApi, ResponseFieldsKeepOnlyTheFieldsAsked) {
  const auto reply = post_json(*client_, "/completion",
                               {{"prompt", "The river"}, {"n_predict", 2}, {"temperature", 0},
                                {"response_fields", {"content", "timings/prompt_n", "timings/nothing", "stop_type"}}});
  ASSERT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(reply.body.size(), 3u) << reply.raw;
  EXPECT_TRUE(reply.body["content"].is_string());
  EXPECT_GT(reply.body["prompt_n"].get<int>(), 0);
  EXPECT_EQ(reply.body["stop_type"], "limit");
  const auto bad = post_json(*client_, "/completion", {{"prompt", "x"}, {"response_fields", "content"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "response_fields");
}

TEST_F(NativeApi, CompletionStreamsPiecesAndEndsWithTheTotals) {
  const json body = {{"prompt", "The river"}, {"n_predict", 5}, {"temperature", 0}, {"ignore_eos", true},
                     {"stream", true},        {"return_tokens", true}};
  const auto res = client_->Post("/completion", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->body.find("[DONE]"), std::string::npos) << "the native stream has no [DONE]";
  const auto payloads = sse_payloads(res->body);
  ASSERT_GE(payloads.size(), 2u);
  std::string streamed;
  std::size_t ids = 0;
  for (std::size_t i = 0; i + 1 < payloads.size(); ++i) {
    const json chunk = json::parse(payloads[i]);
    EXPECT_EQ(chunk["stop"], false);
    streamed += chunk["content"].get<std::string>();
    ids += chunk["tokens"].size();
  }
  const json last = json::parse(payloads.back());
  EXPECT_EQ(last["stop"], true);
  EXPECT_EQ(last["tokens_predicted"], 5);
  EXPECT_EQ(last["stop_type"], "limit");
  EXPECT_EQ(ids, 5u);
  // The streamed text is the text of the same request collected whole.
  json whole = body;
  whole["stream"] = false;
  const auto collected = post_json(*client_, "/completion", whole);
  ASSERT_EQ(collected.status, 200) << collected.raw;
  EXPECT_EQ(streamed, collected.body["content"].get<std::string>());
}

TEST_F(NativeApi, BadNativeFieldsAreRefusedByName) {
  const auto bad_probs = post_json(*client_, "/completion", {{"prompt", "x"}, {"n_probs", 100}});
  EXPECT_EQ(bad_probs.status, 400);
  EXPECT_EQ(bad_probs.body["error"]["param"], "n_probs");
  const auto bad_samplers = post_json(*client_, "/completion", {{"prompt", "x"}, {"samplers", 3}});
  EXPECT_EQ(bad_samplers.status, 400);
  EXPECT_EQ(bad_samplers.body["error"]["param"], "samplers");
  const auto bad_slot = post_json(*client_, "/completion", {{"prompt", "x"}, {"id_slot", -2}});
  EXPECT_EQ(bad_slot.status, 400);
  EXPECT_EQ(bad_slot.body["error"]["param"], "id_slot");
  const auto no_prompt = post_json(*client_, "/completion", {{"n_predict", 2}});
  EXPECT_EQ(no_prompt.status, 400);
  EXPECT_EQ(no_prompt.body["error"]["param"], "prompt");
  auto get = client_->Get("/completion");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
}

TEST_F(NativeApi, DetokenizeUndoesTokenize) {
  const std::string text = "Hello, detokenize: 123 <|im_start|>";
  const auto tokens = post_json(*client_, "/tokenize", {{"content", text}});
  ASSERT_EQ(tokens.status, 200) << tokens.raw;
  const auto back = post_json(*client_, "/detokenize", {{"tokens", tokens.body["tokens"]}});
  ASSERT_EQ(back.status, 200) << back.raw;
  EXPECT_EQ(back.body["content"], text);
  EXPECT_EQ(post_json(*client_, "/detokenize", {{"tokens", json::array()}}).body["content"], "");

  const auto not_array = post_json(*client_, "/detokenize", {{"tokens", "abc"}});
  EXPECT_EQ(not_array.status, 400);
  EXPECT_EQ(not_array.body["error"]["param"], "tokens");
  const auto out_of_range = post_json(*client_, "/detokenize", {{"tokens", json::array({1, 99999999})}});
  EXPECT_EQ(out_of_range.status, 400);
  EXPECT_EQ(out_of_range.body["error"]["param"], "tokens[1]");
  const auto not_integer = post_json(*client_, "/detokenize", {{"tokens", json::array({1.5})}});
  EXPECT_EQ(not_integer.status, 400);
  EXPECT_EQ(not_integer.body["error"]["param"], "tokens[0]");
}

TEST_F(NativeApi, PropsDescribeTheServer) {
  const auto props = get_json(*client_, "/props");
  ASSERT_EQ(props.status, 200) << props.raw;
  EXPECT_GT(props.body["default_generation_settings"]["n_ctx"].get<int>(), 0);
  EXPECT_GE(props.body["total_slots"].get<int>(), 1);
  EXPECT_EQ(props.body["model_alias"], "tiny");
  EXPECT_TRUE(props.body["model_path"].get<std::string>().ends_with(".gguf"));
  EXPECT_EQ(props.body["modalities"]["vision"], false);
  EXPECT_FALSE(props.body["chat_template"].get<std::string>().empty());
  auto post = client_->Post("/props", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
}

TEST_F(NativeApi, HeadAndAllowComeFromTheRouteTable) {
  auto head = client_->Head("/health");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  auto post_health = client_->Post("/health", "{}", "application/json");
  ASSERT_TRUE(post_health);
  EXPECT_EQ(post_health->status, 405);
  EXPECT_EQ(post_health->get_header_value("Allow"), "GET, HEAD");
  // A stored response answers GET and DELETE; a POST is told both.
  auto post_stored = client_->Post("/v1/responses/resp_x", "{}", "application/json");
  ASSERT_TRUE(post_stored);
  EXPECT_EQ(post_stored->status, 405);
  EXPECT_EQ(post_stored->get_header_value("Allow"), "GET, DELETE");
  // Under /v1/messages a refusal takes Anthropic's shape.
  auto get_messages = client_->Get("/v1/messages");
  ASSERT_TRUE(get_messages);
  EXPECT_EQ(get_messages->status, 405);
  EXPECT_EQ(json::parse(get_messages->body)["type"], "error");
  // A control-plane read answers GET and POST.
  auto delete_meta = client_->Delete("/v1/cache/meta");
  ASSERT_TRUE(delete_meta);
  EXPECT_EQ(delete_meta->status, 405);
  EXPECT_EQ(delete_meta->get_header_value("Allow"), "GET, POST");
}

}  // namespace
}  // namespace prefixd::testing
