// The KV layout (--kv-unified / --no-kv-unified): with --deterministic a model with attention cells
// runs a KV stream per sequence, where a request's answer depends neither on what runs beside
// it nor on what other requests left in memory, with the cache on or off (docs/operator-guide.md, "Exactness").
#include <gtest/gtest.h>

#include <cstdlib>
#include <format>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"
#include "sessions_at_once.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

CommandResult prefixd(const std::string& args) {
  return run_shell("env -i PATH=/usr/bin:/bin HOME=/tmp PREFIXD_MODEL_FINGERPRINT_CACHE=off " + std::string(PREFIXD_BINARY) +
                   " " + args + " 2>&1");
}

// Four sessions of three turns at once on --parallel 4 with --deterministic, each turn warm against
// cold (sessions_at_once.h); the startup log holds each of `lines`. On failure, the log's end.
void expect_sessions_as_cold(const std::string& model, const std::vector<std::string>& lines) {
  ServerProcess server({.model = model, .extra_args = {"--deterministic", "--threads", "2"}, .parallel = 4, .ctx_size = 4096});
  expect_answers_as_cold(run_sessions_at_once(server, 4, 3));
  const std::string log = server.log();
  for (const std::string& line : lines) EXPECT_NE(log.find(line), std::string::npos) << "the startup log does not say: " << line;
  if (::testing::Test::HasFailure()) {
    ADD_FAILURE() << "the server's log ends: " << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
  }
}

// Four sessions at once on --parallel 4, each turn sent with the cache and without: every cached
// answer (a hit on the turn before, computed while the other sessions decode beside it and after
// their cells came and went) is its cold twin's. A request answered on the empty server first is
// answered alike after all of that, cached or not. (With --kv-unified added, the same sessions
// answered unlike their cold twins in one to three turns in each of 3 runs.)
TEST(KvLayout, DeterministicSessionsAtOnceAnswerAsColdOnesOnADenseModel) {
  expect_sessions_as_cold(PREFIXD_TINY_MODEL, {"KV layout: a stream of"});
}

// The same on a sliding-window model: its window layers keep every cell of the sequence's stream,
// and the cache resumes it at kept states. (These sessions happened to answer as cold in the pool
// too, in 6 of 6 runs; ctest stream_invariance_deterministic_window_cpu shows the placement that
// the pool gets wrong and streams do not.)
TEST(KvLayout, DeterministicSessionsAtOnceAnswerAsColdOnesOnASlidingWindowModel) {
  expect_sessions_as_cold(std::string(PREFIXD_TEST_MODELS_DIR) + "/gemma3-tiny.gguf",
                          {"KV layout: a stream of", "prefixes are reused at checkpoints"});
}

// And on a hybrid model, each of whose sequences has an empty partner stream that pads its lone
// decode row, since its recurrent state cannot take a pad row of its own. (These sessions answered
// as cold in the pool too, in 3 of 3 runs; ctest stream_invariance_deterministic_hybrid_cpu shows
// the placement that the pool gets wrong and streams do not.)
TEST(KvLayout, DeterministicSessionsAtOnceAnswerAsColdOnesOnAHybridModel) {
  expect_sessions_as_cold(std::string(PREFIXD_TEST_MODELS_DIR) + "/qwen35-tiny.gguf",
                          {"KV layout: a stream of", "has an empty partner stream"});
}

// --kv-unified keeps the pool under --deterministic; the startup log says nothing of streams.
TEST(KvLayout, KvUnifiedKeepsThePoolUnderDeterministic) {
  ServerProcess server({.extra_args = {"--deterministic", "--kv-unified"}, .parallel = 2});
  auto client = server.client();
  const JsonReply reply = post_json(*client, "/v1/chat/completions",
                                    {{"messages", {{{"role", "user"}, {"content", "Hello there"}}}}, {"max_tokens", 4}});
  EXPECT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(server.log().find("KV layout: a stream of"), std::string::npos);
}

// Streams serve models that keep attention cells, and copy a sequence only from its first position
// on: refused for a recurrent model and with --cache-reuse, naming the way out.
TEST(KvLayout, StreamsAreRefusedWhereTheyCannotServe) {
  const CommandResult recurrent = prefixd("serve --model " + std::string(PREFIXD_TEST_MODELS_DIR) +
                                          "/mamba2-tiny.gguf --no-kv-unified --ctx-size 1024 --port 1");
  EXPECT_NE(recurrent.status, 0) << recurrent.output;
  EXPECT_NE(recurrent.output.find("serves models with attention cells only"), std::string::npos) << recurrent.output;
  EXPECT_NE(recurrent.output.find("--kv-unified"), std::string::npos) << recurrent.output;

  const CommandResult shifting = prefixd("serve --model " + std::string(PREFIXD_TINY_MODEL) +
                                         " --no-kv-unified --cache-reuse 16 --ctx-size 1024 --port 1");
  EXPECT_NE(shifting.status, 0) << shifting.output;
  EXPECT_NE(shifting.output.find("--cache-reuse"), std::string::npos) << shifting.output;
  EXPECT_NE(shifting.output.find("--no-kv-unified"), std::string::npos) << shifting.output;
  EXPECT_EQ(shifting.output.find("GGML_ASSERT"), std::string::npos) << shifting.output;
}

}  // namespace
}  // namespace prefixd::testing
