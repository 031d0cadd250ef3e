// llama-server's POST /infill on the real `prefixd serve`: the fill-in-the-middle prompt of the
// generated coder vocabulary, its reuse as an editor resends it, its stream, bad fields refused by
// name, and a model without fill-in-the-middle tokens refused.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

class Infill : public ::testing::Test {
 protected:
  // A context past the infill window (2048) plus twice n_predict, so other files' chunks fit.
  static void SetUpTestSuite() { server_ = std::make_unique<ServerProcess>(ServerConfig{.parallel = 1, .ctx_size = 4096}); }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { client_ = server_->client(); }

  std::size_t plain_tokens(const std::string& text) {
    const auto reply = post_json(*client_, "/tokenize", {{"content", text}, {"add_special", false}, {"parse_special", false}});
    EXPECT_EQ(reply.status, 200) << reply.raw;
    return reply.body["tokens"].size();
  }

  static std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<httplib::Client> client_;
};

std::unique_ptr<ServerProcess> Infill::server_;

const std::string kPrefix = "def fibonacci(n):\n    \"\"\"The n-th Fibonacci number.\"\"\"\n    if n < 2:\n        ";
const std::string kSuffix = "\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\nprint(fibonacci(10))\n";

json infill_body() {
  return {{"input_prefix", kPrefix},
          {"input_suffix", kSuffix},
          {"input_extra", json::array({{{"filename", "util.py"}, {"text", "def square(x):\n    return x * x\n"}},
                                       {{"filename", "main.py"}, {"text", "from util import square\n"}}})},
          {"prompt", "return"},
          {"n_predict", 4},
          {"temperature", 0},
          {"ignore_eos", true},
          {"cache_prompt", true}};
}

TEST_F(Infill, ThePromptIsLlamaServersRepositoryLayoutAndAResendComesFromTheCache) {
  // The markers are single control tokens of the generated vocabulary.
  const auto marker = post_json(*client_, "/tokenize", {{"content", "<|fim_prefix|>"}, {"parse_special", true}});
  ASSERT_EQ(marker.status, 200) << marker.raw;
  ASSERT_EQ(marker.body["tokens"].size(), 1u);

  // [repo]myproject\n [sep]util.py\n{text} [sep]main.py\n{text} [sep]filename\n [pre]{prefix}{prompt} [suf]{suffix} [mid]
  const std::size_t expected = 1 + plain_tokens("myproject\n") + 1 + plain_tokens("util.py\n") +
                               plain_tokens("def square(x):\n    return x * x\n") + 1 + plain_tokens("main.py\n") +
                               plain_tokens("from util import square\n") + 1 + plain_tokens("filename\n") + 1 +
                               plain_tokens(kPrefix) + plain_tokens("return") + 1 + plain_tokens(kSuffix) + 1;
  const auto cold = post_json(*client_, "/infill", infill_body());
  ASSERT_EQ(cold.status, 200) << cold.raw;
  EXPECT_EQ(cold.body["tokens_evaluated"], expected);
  EXPECT_EQ(cold.body["tokens_predicted"], 4);
  EXPECT_EQ(cold.body["stop_type"], "limit");
  EXPECT_EQ(cold.body["stop"], true);

  // The editor asks again at the same place: the same completion, the prompt from the cache.
  const auto again = post_json(*client_, "/infill", infill_body());
  ASSERT_EQ(again.status, 200) << again.raw;
  EXPECT_EQ(again.body["content"], cold.body["content"]);
  EXPECT_EQ(again.body["tokens_cached"].get<std::size_t>(), expected - 1) << again.raw;

  // The text after the cursor changed: everything up to the suffix marker is reused.
  json edited = infill_body();
  edited["input_suffix"] = "\n    return 0\n";
  const auto after_edit = post_json(*client_, "/infill", edited);
  ASSERT_EQ(after_edit.status, 200) << after_edit.raw;
  EXPECT_GE(after_edit.body["tokens_cached"].get<std::size_t>(), expected - plain_tokens(kSuffix) - 2) << after_edit.raw;
}

TEST_F(Infill, StreamsLikeCompletionAndTheTimeBoundsAreAccepted) {
  json body = infill_body();
  body["stream"] = true;
  body["t_max_prompt_ms"] = 500;
  body["t_max_predict_ms"] = 60000;
  body["n_indent"] = 0;
  body["samplers"] = json::array({"top_k", "top_p", "infill"});
  const auto res = client_->Post("/infill", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto payloads = sse_payloads(res->body);
  ASSERT_GE(payloads.size(), 2u);
  std::string streamed;
  for (std::size_t i = 0; i + 1 < payloads.size(); ++i) streamed += json::parse(payloads[i])["content"].get<std::string>();
  const json last = json::parse(payloads.back());
  EXPECT_EQ(last["stop"], true);
  EXPECT_EQ(last["tokens_predicted"], 4);
  const auto whole = post_json(*client_, "/infill", infill_body());
  ASSERT_EQ(whole.status, 200) << whole.raw;
  EXPECT_EQ(streamed, whole.body["content"].get<std::string>());

  // Nothing but the cursor's prefix: a valid request too.
  const auto bare = post_json(*client_, "/infill", {{"input_prefix", "x = "}, {"n_predict", 2}, {"temperature", 0}});
  ASSERT_EQ(bare.status, 200) << bare.raw;
}

// An editor drops a completion as the user types on: the server notices, ends the request, keeps
// what it computed, and its cache stays consistent (test servers verify every cache operation
// and abort on a violation).
TEST_F(Infill, ACompletionTheEditorDropsLeavesTheCacheConsistent) {
  json body = infill_body();
  body["input_suffix"] = "\nprint('a suffix no other test sends')\n";
  body["n_predict"] = 4000;
  body["stream"] = true;
  int reads = 0;
  auto res = client_->Post("/infill", httplib::Headers{}, body.dump(), "application/json",
                           [&](const char*, std::size_t) { return ++reads < 3; });
  EXPECT_FALSE(res) << "the client hung up mid-stream";
  bool idle = false;
  for (int i = 0; i < 300 && !idle; ++i) {
    const auto metrics = client_->Get("/metrics");
    idle = metrics && metric_value(metrics->body, "prefixd_requests_running") == 0;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(idle) << "the dropped request ended";
  body["stream"] = false;
  body["n_predict"] = 2;
  const auto again = post_json(*client_, "/infill", body);
  ASSERT_EQ(again.status, 200) << again.raw;
  EXPECT_EQ(again.body["tokens_cached"].get<int>() + 1, again.body["tokens_evaluated"].get<int>())
      << "the dropped request's whole prompt was kept";
  EXPECT_TRUE(server_->running());
}

TEST_F(Infill, BadFieldsAreRefusedByName) {
  const auto refused = [&](json body, const std::string& param) {
    const auto reply = post_json(*client_, "/infill", body);
    EXPECT_EQ(reply.status, 400) << param << ": " << reply.raw;
    EXPECT_EQ(reply.body["error"]["param"], param) << reply.raw;
  };
  refused({{"input_prefix", 5}}, "input_prefix");
  refused({{"input_suffix", json::array()}}, "input_suffix");
  refused({{"input_extra", "util.py"}}, "input_extra");
  refused({{"input_extra", json::array({"text"})}}, "input_extra[0]");
  refused({{"input_extra", json::array({{{"text", "a"}}, {{"filename", "b.py"}}})}}, "input_extra[1].text");
  refused({{"input_extra", json::array({{{"text", "a"}, {"filename", 3}}})}}, "input_extra[0].filename");
  refused({{"prompt", json::object()}}, "prompt");
  refused({{"n_predict", 0}}, "n_predict");
  refused({{"t_max_predict_ms", "soon"}}, "t_max_predict_ms");
  refused({{"t_max_prompt_ms", -5}}, "t_max_prompt_ms");
  refused({{"n_indent", -1}}, "n_indent");
  refused({{"n_indent", "four"}}, "n_indent");
  refused({{"n_probs", 100}}, "n_probs");
  // A cursor in a prompt longer than the context: the reply's budget leaves no room.
  const auto too_long = post_json(*client_, "/infill", {{"input_prefix", std::string(30000, 'x')}, {"prompt", std::string(30000, 'y')}});
  EXPECT_EQ(too_long.status, 400) << too_long.raw;
}

TEST(InfillWithoutMarkers, AModelWithoutFillInTheMiddleTokensIsTold) {
  ServerProcess server({.model = std::string(PREFIXD_TEST_MODELS_DIR) + "/archs/gemma2-dense.gguf", .parallel = 1});
  auto client = server.client();
  const auto reply = post_json(*client, "/infill", {{"input_prefix", "x = "}, {"n_predict", 2}});
  EXPECT_EQ(reply.status, 400) << reply.raw;
  EXPECT_NE(reply.body["error"]["message"].get<std::string>().find("fill in the middle"), std::string::npos) << reply.raw;
  // A completion still works there.
  const auto completion = post_json(*client, "/completion", {{"prompt", "x = "}, {"n_predict", 2}});
  EXPECT_EQ(completion.status, 200) << completion.raw;
}

}  // namespace
}  // namespace prefixd::testing
