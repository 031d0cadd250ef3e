// Reuse by shifting (--cache-reuse / n_cache_reuse) on the real `prefixd serve`: a chunk cut out of
// the middle and a rotated ring of chunks, counted from the engine's fed tokens; the counts of
// responses, /v1/cache/stats and /metrics agree; families that cannot shift are refused.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"
#include "support/disk_fixtures.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

// `n` token ids from `first` on, every one a plain token of the tiny vocabulary.
json run(int first, int n) {
  json out = json::array();
  for (int i = 0; i < n; ++i) out.push_back(first + i);
  return out;
}

json cat(std::initializer_list<json> parts) {
  json out = json::array();
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

struct Sent {
  int cached = 0;
  int fed = 0;
  int shifted = 0;
};

Sent send(httplib::Client& client, const json& prompt, json extra = json::object()) {
  json body = {{"prompt", prompt}, {"n_predict", 1}, {"temperature", 0}};
  body.update(extra);
  const auto reply = post_json(client, "/completion", body);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  const json& cache = reply.body["prompt_cache"];
  return {cache.value("cached_tokens", -1), cache.value("fed_tokens", -1), cache.value("shifted_tokens", -1)};
}

double fed_total(httplib::Client& client) {
  const auto res = client.Get("/metrics");
  return res ? metric_value(res->body, "prefixd_prompt_tokens_fed_total") : -1;
}

TEST(CacheReuse, AChunkCutFromTheMiddleAndARotatedRingAreShiftedNotComputed) {
  ServerProcess server({.extra_args = {"--cache-reuse", "16"}, .parallel = 1, .ctx_size = 4096});
  auto client = server.client();
  const json x = run(300, 64), y = run(500, 64), z = run(700, 96), w = run(900, 32);

  const Sent first = send(*client, cat({x, y, z}));
  EXPECT_EQ(first.fed, 224);
  EXPECT_EQ(first.shifted, 0);

  // y is gone: x is the exact prefix, z moves 64 positions down, w is new.
  const double fed_before = fed_total(*client);
  const Sent cut = send(*client, cat({x, z, w}));
  EXPECT_EQ(cut.shifted, 96) << "z whole: the prompt's last token is w's";
  EXPECT_EQ(cut.cached, 64 + 96);
  EXPECT_EQ(cut.fed, 32);
  EXPECT_EQ(fed_total(*client) - fed_before, 32) << "the engine computed w alone";

  // A ring of chunks rotated by one: nothing is an exact prefix; three chunks move down together.
  const json a = run(1100, 48), b = run(1200, 48), c = run(1300, 48), d = run(1400, 48), e = run(1500, 48);
  send(*client, cat({a, b, c, d}));
  const Sent ring = send(*client, cat({b, c, d, e}));
  EXPECT_EQ(ring.shifted, 144);
  EXPECT_EQ(ring.fed, 48);

  // The request that asks for no shifting computes what follows its exact prefix.
  const Sent off = send(*client, cat({x, y, w}), {{"n_cache_reuse", 0}});
  EXPECT_EQ(off.shifted, 0);
  EXPECT_EQ(off.cached, 128) << "x and y are an exact prefix of the first prompt";

  // Responses, stats and metrics agree: shifted tokens are counted apart from exact reuse.
  const auto stats_get = client->Get("/v1/cache/stats");
  ASSERT_TRUE(stats_get);
  const json s = json::parse(stats_get->body);
  EXPECT_EQ(s["shifted"]["tokens"], 96 + 144);
  EXPECT_EQ(s["shifted"]["requests"], 2);
  const auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metric_value(metrics->body, "prefixd_prompt_cache_shifted_tokens_total"), 96 + 144);
  EXPECT_EQ(metric_value(metrics->body, "prefixd_prompt_cache_shifted_requests_total"), 2);
  EXPECT_EQ(metric_value(metrics->body, "prefixd_prompt_cache_prefix_tokens_reused_total"), s["tokens_reused"].get<double>());
}

// A sequence the device no longer holds — demoted to host memory while another request ran, as the
// CPU's idle budget of 0 does — still gives its chunks: from its host segments, a chain of several
// here (the server verifies, among the cache's invariants, that using them kept every segment no
// more recently used than its parent).
TEST(CacheReuse, ChunksComeFromHostSegmentsWhenTheDeviceLetTheSequenceGo) {
  ServerProcess server({.extra_args = {"--cache-reuse", "16", "--prompt-cache-host-segment", "64"},
                        .parallel = 1,
                        .ctx_size = 4096});
  auto client = server.client();
  const json a = run(1100, 48), b = run(1200, 48), c = run(1300, 48), d = run(1400, 48), e = run(1500, 48);
  send(*client, cat({a, b, c, d}));
  send(*client, run(2000, 100));  // another text: the first one's cells leave the device
  const auto tiers = client->Get("/v1/cache/stats");
  ASSERT_TRUE(tiers);
  EXPECT_GE(json::parse(tiers->body)["tiers"]["host"]["entries"].get<int>(), 1) << tiers->body;
  const auto reply = post_json(*client, "/completion", {{"prompt", cat({b, c, d, e})}, {"n_predict", 1}, {"temperature", 0}});
  ASSERT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(reply.body["prompt_cache"]["shifted_tokens"], 144) << reply.raw;
  EXPECT_EQ(reply.body["prompt_cache"]["fed_tokens"], 48);
  EXPECT_EQ(reply.body["prompt_cache"]["tier"], "host");
}

// After a restart the device and host memory are empty: a sequence the disk's files hold gives its
// chunks, read back into host memory first.
TEST(CacheReuse, ChunksComeFromDiskFilesAfterARestart) {
  TempDir dir("shift-disk");
  const ServerConfig config{.extra_args = {"--cache-reuse", "16", "--cache-disk-path", dir.path().string()},
                            .parallel = 1,
                            .ctx_size = 4096};
  const json a = run(1100, 48), b = run(1200, 48), c = run(1300, 48), d = run(1400, 48), e = run(1500, 48);
  {
    ServerProcess server(config);
    auto client = server.client();
    send(*client, cat({a, b, c, d}));
    bool written = false;
    for (int i = 0; i < 1500 && !written; ++i) {
      const json disk = get_json(*client, "/v1/cache/stats").body["tiers"]["disk"];
      written = disk["queue_bytes"] == 0 && disk["entries"].get<int>() >= 1;
      if (!written) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(written) << "the sequence reached the disk";
  }
  ServerProcess server(config);
  auto client = server.client();
  const double fed_before = fed_total(*client);
  const auto reply = post_json(*client, "/completion", {{"prompt", cat({b, c, d, e})}, {"n_predict", 1}, {"temperature", 0}});
  ASSERT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(reply.body["prompt_cache"]["tier"], "disk") << reply.raw;
  EXPECT_EQ(reply.body["prompt_cache"]["shifted_tokens"], 144) << reply.raw;
  EXPECT_EQ(reply.body["prompt_cache"]["fed_tokens"], 48);
  EXPECT_EQ(fed_total(*client) - fed_before, 48) << "the engine computed e alone";
  const json stats = get_json(*client, "/v1/cache/stats").body;
  EXPECT_EQ(stats["shifted"]["tokens"], 144);
}

TEST(CacheReuse, OffByDefaultAndARequestMayTurnItOn) {
  ServerProcess server({.parallel = 1, .ctx_size = 4096});
  auto client = server.client();
  const json x = run(300, 64), y = run(500, 64), z = run(700, 96), w = run(900, 32);
  send(*client, cat({x, y, z}));
  const Sent plain = send(*client, cat({x, z, w}));
  EXPECT_EQ(plain.shifted, 0);
  EXPECT_EQ(plain.fed, 128) << "without --cache-reuse everything after the exact prefix is computed";
  // Another text, so that no exact prefix of it is cached yet past its first chunk.
  const json x2 = run(1100, 64), y2 = run(1300, 64), z2 = run(1500, 96);
  send(*client, cat({x2, y2, z2}));
  const Sent asked = send(*client, cat({x2, z2, w}), {{"n_cache_reuse", 16}});
  EXPECT_EQ(asked.shifted, 96);
  EXPECT_EQ(asked.fed, 32);
  const auto bad = post_json(*client, "/completion", {{"prompt", "x"}, {"n_cache_reuse", -1}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "n_cache_reuse");
}

TEST(CacheReuse, AModelThatCannotShiftIsRefusedAtStartAndPerRequest) {
  const std::string models = PREFIXD_TEST_MODELS_DIR;
  // Bounded: a server that did start would serve until killed.
  const std::string serve = "timeout 60 " + std::string(PREFIXD_BINARY) + " serve --port 1 --cache-reuse 256 --model ";
  // A window cache drops the cells a chunk may need: --swa-full on keeps them (below).
  const CommandResult window = run_shell(serve + models + "/gemma3-tiny.gguf --swa-full off 2>&1");
  EXPECT_NE(window.status, 0);
  EXPECT_NE(window.output.find("--swa-full on"), std::string::npos) << window.output;
  // A recurrent state has no cells to move.
  const CommandResult recurrent = run_shell(serve + models + "/mamba2-tiny.gguf 2>&1");
  EXPECT_NE(recurrent.status, 0);
  EXPECT_NE(recurrent.output.find("--cache-reuse"), std::string::npos) << recurrent.output;

  ServerProcess server({.model = models + "/gemma3-tiny.gguf", .extra_args = {"--swa-full", "off"}, .parallel = 1});
  auto client = server.client();
  const auto asked = post_json(*client, "/completion", {{"prompt", "x = 1"}, {"n_predict", 1}, {"n_cache_reuse", 256}});
  EXPECT_EQ(asked.status, 400) << asked.raw;
  EXPECT_EQ(asked.body["error"]["param"], "n_cache_reuse");
}

// A sliding-window model with its full window cache keeps every cell: its chunks move as a dense
// model's do, counted from the engine's fed tokens.
TEST(CacheReuse, ASlidingWindowModelWithItsFullCacheShifts) {
  ServerProcess server({.model = std::string(PREFIXD_TEST_MODELS_DIR) + "/gemma3-tiny.gguf",
                        .extra_args = {"--cache-reuse", "16", "--swa-full", "on"},
                        .parallel = 1,
                        .ctx_size = 4096});
  auto client = server.client();
  const json x = run(300, 64), y = run(500, 64), z = run(700, 96), w = run(900, 32);
  EXPECT_EQ(send(*client, cat({x, y, z})).fed, 224);
  const double fed_before = fed_total(*client);
  const Sent cut = send(*client, cat({x, z, w}));
  EXPECT_EQ(cut.shifted, 96);
  EXPECT_EQ(cut.cached, 64 + 96);
  EXPECT_EQ(fed_total(*client) - fed_before, 32) << "the engine computed w alone";
}

}  // namespace
}  // namespace prefixd::testing
