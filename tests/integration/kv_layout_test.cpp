// The KV layout (--kv-unified / --no-kv-unified): with --deterministic a dense model runs a KV
// stream per sequence, where a request's answer depends neither on what runs beside it nor on what
// other requests left in memory, with the cache on or off (docs/operator-guide.md, "Exactness").
#include <gtest/gtest.h>

#include <cstdlib>
#include <format>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

CommandResult prefixd(const std::string& args) {
  return run_shell("env -i PATH=/usr/bin:/bin HOME=/tmp PREFIXD_MODEL_FINGERPRINT_CACHE=off " + std::string(PREFIXD_BINARY) +
                   " " + args + " 2>&1");
}

json chat(const std::vector<json>& messages, bool cache_prompt) {
  return {{"messages", messages}, {"max_tokens", 6}, {"temperature", 0}, {"cache_prompt", cache_prompt}};
}

std::string text_of(const JsonReply& reply) {
  if (reply.status != 200) return std::format("<{}: {}>", reply.status, reply.raw.substr(0, 200));
  return reply.body["choices"][0]["message"].value("content", "");
}

std::string topic(int session, int turn) {
  std::string out = std::format("Session {} turn {}:", session, turn);
  for (int i = 0; i < 40 + 13 * session + 7 * turn; ++i) out += std::format(" item{}-{}", (i * 7 + session) % 97, turn);
  return out;
}

// Four sessions at once on --parallel 4, each turn sent with the cache and without: every cached
// answer (a hit on the turn before, computed while the other sessions decode beside it and after
// their cells came and went) is its cold twin's. A request answered on the empty server first is
// answered alike after all of that, cached or not. (With --kv-unified added, the same sessions
// answered unlike their cold twins in one to three turns in each of 3 runs.)
TEST(KvLayout, DeterministicSessionsAtOnceAnswerAsColdOnesOnADenseModel) {
  ServerProcess server({.extra_args = {"--deterministic", "--threads", "2"}, .parallel = 4, .ctx_size = 4096});
  auto client = server.client();
  const std::vector<json> probe = {{{"role", "user"}, {"content", topic(9, 0)}}};
  const std::string on_empty = text_of(post_json(*client, "/v1/chat/completions", chat(probe, false)));

  constexpr int kSessions = 4;
  constexpr int kTurns = 3;
  std::vector<std::vector<std::string>> differences(kSessions);
  std::vector<int> cached(kSessions, 0);
  std::vector<std::thread> threads;
  for (int s = 0; s < kSessions; ++s) {
    threads.emplace_back([&, s] {
      auto own = server.client();
      std::vector<json> messages;
      for (int turn = 0; turn < kTurns; ++turn) {
        messages.push_back({{"role", "user"}, {"content", topic(s, turn)}});
        const JsonReply warm = post_json(*own, "/v1/chat/completions", chat(messages, true));
        const JsonReply cold = post_json(*own, "/v1/chat/completions", chat(messages, false));
        if (warm.status == 200) cached[static_cast<size_t>(s)] += warm.body["usage"]["prompt_tokens_details"].value("cached_tokens", 0);
        if (text_of(warm) != text_of(cold)) {
          differences[static_cast<size_t>(s)].push_back(std::format("turn {}: cached {:?} cold {:?}", turn, text_of(warm), text_of(cold)));
        }
        messages.push_back({{"role", "assistant"}, {"content", text_of(warm)}});
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int s = 0; s < kSessions; ++s) {
    EXPECT_TRUE(differences[static_cast<size_t>(s)].empty()) << "session " << s << ": " << differences[static_cast<size_t>(s)].front();
    EXPECT_GT(cached[static_cast<size_t>(s)], 0) << "session " << s << " reused nothing: no cached answer was compared";
  }
  EXPECT_EQ(text_of(post_json(*client, "/v1/chat/completions", chat(probe, false))), on_empty) << "cold, after history";
  EXPECT_EQ(text_of(post_json(*client, "/v1/chat/completions", chat(probe, true))), on_empty) << "cached, after history";
  const JsonReply resent = post_json(*client, "/v1/chat/completions", chat(probe, true));
  EXPECT_EQ(text_of(resent), on_empty) << "resent";
  EXPECT_GT(resent.body["usage"]["prompt_tokens_details"].value("cached_tokens", 0), 0) << resent.raw;
  EXPECT_NE(server.log().find("KV layout: a stream of"), std::string::npos) << "the server did not run a stream per sequence";
}

// --kv-unified keeps the pool under --deterministic; the startup log says nothing of streams.
TEST(KvLayout, KvUnifiedKeepsThePoolUnderDeterministic) {
  ServerProcess server({.extra_args = {"--deterministic", "--kv-unified"}, .parallel = 2});
  auto client = server.client();
  const JsonReply reply =
      post_json(*client, "/v1/chat/completions", chat({{{"role", "user"}, {"content", topic(1, 1)}}}, true));
  EXPECT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(server.log().find("KV layout: a stream of"), std::string::npos);
}

// Streams copy a sequence only from its first position on: refused where the model's memory or
// --cache-reuse needs more, naming the way out.
TEST(KvLayout, StreamsAreRefusedWhereTheyCannotServe) {
  const CommandResult window = prefixd("serve --model " + std::string(PREFIXD_TEST_MODELS_DIR) +
                                       "/gemma3-tiny.gguf --no-kv-unified --ctx-size 1024 --port 1");
  EXPECT_NE(window.status, 0) << window.output;
  EXPECT_NE(window.output.find("serves dense models only"), std::string::npos) << window.output;
  EXPECT_NE(window.output.find("--kv-unified"), std::string::npos) << window.output;

  const CommandResult shifting = prefixd("serve --model " + std::string(PREFIXD_TINY_MODEL) +
                                         " --no-kv-unified --cache-reuse 16 --ctx-size 1024 --port 1");
  EXPECT_NE(shifting.status, 0) << shifting.output;
  EXPECT_NE(shifting.output.find("--cache-reuse"), std::string::npos) << shifting.output;
  EXPECT_NE(shifting.output.find("--no-kv-unified"), std::string::npos) << shifting.output;
  EXPECT_EQ(shifting.output.find("GGML_ASSERT"), std::string::npos) << shifting.output;
}

}  // namespace
}  // namespace prefixd::testing
