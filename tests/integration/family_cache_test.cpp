// Checkpoint families through the real server, on the hybrid preset: a chat's turns resume at
// checkpoints, the reported numbers agree across responses, /v1/cache/stats and /metrics, and the
// family and its reuse mode are reported.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

double metric(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

TEST(FamilyCache, HybridChatTurnsResumeAtCheckpointsAndEveryCounterAgrees) {
  ServerProcess server({.model = std::string(PREFIXD_TEST_MODELS_DIR) + "/qwen35-tiny.gguf", .parallel = 1,
                        .ctx_size = 4096});
  auto client = server.client();
  std::string system = "You are a meticulous librarian. ";
  for (int i = 0; i < 12; ++i) system += "Rule " + std::to_string(i) + ": catalogue every book by author and year. ";
  json messages = json::array({{{"role", "system"}, {"content", system}}});
  int previous_prompt = 0;
  int restored = 0;
  for (int turn = 0; turn < 3; ++turn) {
    messages.push_back({{"role", "user"}, {"content", "Question " + std::to_string(turn) + ": where is the atlas?"}});
    const auto reply = post_json(*client, "/v1/chat/completions",
                                 {{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}, {"user", "alice"}});
    ASSERT_EQ(reply.status, 200) << reply.raw;
    const json& cache = reply.body["prompt_cache"];
    const int prompt = reply.body["usage"]["prompt_tokens"];
    if (turn == 0) {
      EXPECT_EQ(cache["outcome"], "cold");
    } else {
      // The previous prompt was checkpointed after its last token: only what the client added is fed.
      EXPECT_EQ(cache["cached_tokens"], previous_prompt) << reply.raw;
      EXPECT_EQ(cache["fed_tokens"], prompt - previous_prompt);
      restored += 1;
    }
    previous_prompt = prompt;
    messages.push_back({{"role", "assistant"}, {"content", "On shelf " + std::to_string(turn) + ", next to the maps."}});
    // The warm-up after the reply runs off the request path; let it finish so the counters settle.
    for (int i = 0; i < 100 && get_json(*client, "/v1/cache/stats").body["running"] != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const json stats = get_json(*client, "/v1/cache/stats").body;
  EXPECT_EQ(stats["family"], "hybrid");
  EXPECT_EQ(stats["reuse"], "checkpoints");
  EXPECT_GT(stats["snapshots"]["entries"].get<int>(), 0);
  EXPECT_GT(stats["snapshots"]["bytes"].get<double>(), 0);
  EXPECT_GE(stats["snapshots"]["restores"].get<int>(), restored);
  const auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metric(metrics->body, "prefixd_prompt_cache_snapshots"), stats["snapshots"]["entries"].get<double>());
  EXPECT_EQ(metric(metrics->body, "prefixd_prompt_cache_snapshot_bytes"), stats["snapshots"]["bytes"].get<double>());
  EXPECT_EQ(metric(metrics->body, "prefixd_prompt_cache_snapshot_restores_total"),
            stats["snapshots"]["restores"].get<double>());
  EXPECT_EQ(metric(metrics->body, "prefixd_prompt_cache_snapshots_saved_total"), stats["snapshots"]["saved"].get<double>());
  EXPECT_EQ(metric(metrics->body, "prefixd_warmup_tokens_total"), 0)
      << "a client that writes its own assistant turns is not warmed up for";
  EXPECT_NE(server.log().find("prefixes are reused at checkpoints"), std::string::npos) << "the policy is logged";
}

}  // namespace
}  // namespace prefixd::testing
