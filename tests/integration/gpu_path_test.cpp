// The GPU path: every family's tiny preset with all layers on a GPU device (--gpu-layers 99), its
// K/V and the device tier in device memory. The suite runs it on Mesa's lavapipe, a Vulkan device
// that runs on the CPU (ctest label `gpu`; GGML_VK_VISIBLE_DEVICES=0 makes ggml's Vulkan backend use
// it), so it proves behaviour, not speed: device-tier hits, host and disk restores into device
// memory, the checkpoints of hybrid, recurrent and window state, flash attention and the image
// encoder on the device, requests sharing a prefix at once, warm = cold, and responses = stats =
// metrics. A machine with a real GPU runs it there.
//
// Without a GPU device the tests fail, naming what is missing: a build root made from
// scripts/sid-packages.txt has the Vulkan backend and lavapipe. PREFIXD_TEST_NO_GPU=1 skips them
// on a host that builds natively without a Vulkan backend.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <format>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "api/images/image_input.h"
#include "server_process.h"
#include "sessions_at_once.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kModels = PREFIXD_TEST_MODELS_DIR;

bool gpu_tests_skipped() {
  const char* value = std::getenv("PREFIXD_TEST_NO_GPU");
  return value != nullptr && std::string(value) == "1";
}

ServerConfig gpu_server(const std::string& model, std::vector<std::string> extra) {
  ServerConfig config{.model = model, .parallel = 2, .ctx_size = 2048};
  config.extra_args = {"--gpu-layers", "99", "--threads", "2"};
  config.extra_args.insert(config.extra_args.end(), extra.begin(), extra.end());
  // lavapipe is a CPU-type device, which ggml's Vulkan backend uses only when named; on a machine
  // with a real GPU, device 0 is that GPU.
  config.env = {{"GGML_VK_VISIBLE_DEVICES", "0"}};
  return config;
}

// The startup line that says where the model runs must name a GPU device and offloaded layers.
// `budget_cells`: the device tier's idle-cell budget the server runs with (its default on a GPU is
// half the context: 1024 of these servers' 2048 cells).
void expect_on_the_device(const ServerProcess& server, int budget_cells) {
  const std::string log = server.log();
  const auto line_at = log.find("compute: ");
  ASSERT_NE(line_at, std::string::npos) << log;
  const std::string line = log.substr(line_at, log.find('\n', line_at) - line_at);
  ASSERT_EQ(line.find("compute: CPU"), std::string::npos)
      << "no GPU device: the build root needs ggml's Vulkan backend and Mesa's lavapipe (scripts/sid-packages.txt); "
      << line;
  EXPECT_NE(line.find("in device memory"), std::string::npos) << line;
  // The defaults a GPU changes (docs/operator-guide.md, "Serving on a GPU"): prefill packing on,
  // and (unless a test sets another) half the context's cells may stay idle in the device tier.
  EXPECT_NE(log.find("prefill packing: on (the default with layers on a GPU)"), std::string::npos) << log;
  auto client = server.client();
  const JsonReply stats = get_json(*client, "/v1/cache/stats");
  ASSERT_EQ(stats.status, 200);
  if (stats.body["family"] != "recurrent") {
    EXPECT_EQ(stats.body["tiers"]["device"]["budget_cells"].get<int>(), budget_cells) << stats.raw;
  }
}

std::string words(int count, int salt) {
  static const std::vector<std::string> vocabulary = {"river", "stone", "lantern", "orbit", "copper", "meadow",
                                                      "signal", "harbor", "velvet", "quartz", "ember", "tundra"};
  std::string out;
  for (int i = 0; i < count; ++i) out += (i ? " " : "") + vocabulary[static_cast<size_t>((i * 7 + salt * 13 + i / 5) % 12)];
  return out;
}

json chat(const std::string& system, const std::string& user) {
  return {{"messages", json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}})},
          {"max_tokens", 1},
          {"temperature", 0}};
}

struct Answer {
  std::string text;
  int prompt = 0;
  int cached = 0;
  std::string tier;
};

Answer ask(httplib::Client& client, json request, bool cache = true) {
  if (!cache) request["cache_prompt"] = false;
  const JsonReply reply = post_json(client, "/v1/chat/completions", request);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  Answer a;
  if (reply.status != 200) return a;
  a.text = reply.body["choices"][0]["message"]["content"].get<std::string>();
  a.prompt = reply.body["usage"]["prompt_tokens"].get<int>();
  const json& pc = reply.body["prompt_cache"];
  a.cached = pc["cached_tokens"].get<int>();
  if (pc["tier"].is_string()) a.tier = pc["tier"].get<std::string>();
  return a;
}

// /v1/cache/stats and /metrics say the same, and both what the responses said.
void expect_counts_agree(const ServerProcess& server, std::int64_t reused_in_responses) {
  auto client = server.client();
  const JsonReply stats = get_json(*client, "/v1/cache/stats");
  ASSERT_EQ(stats.status, 200);
  const auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(stats.body["tokens_reused"].get<double>(), metric_value(metrics->body, "prefixd_prompt_cache_prefix_tokens_reused_total"));
  EXPECT_EQ(stats.body["hits"].get<double>(), metric_value(metrics->body, "prefixd_prompt_cache_hits_total"));
  // Prompt tokens the cache looked up (prefixd_prompt_tokens_total also counts cache_prompt:false).
  EXPECT_EQ(stats.body["prompt_tokens"].get<double>(), metric_value(metrics->body, "prefixd_prefix_cache_queries_total"));
  EXPECT_EQ(stats.body["tokens_reused"].get<std::int64_t>(), reused_in_responses);
  // The memory a GPU deployment reports counts the device's.
  EXPECT_GT(stats.body["compute"]["layers_on_gpu"].get<int>(), 0);
  EXPECT_EQ(stats.body["compute"]["layers_on_gpu"].get<double>(), metric_value(metrics->body, "prefixd_gpu_layers"));
  if (stats.body["family"] != "recurrent") {
    EXPECT_GT(metric_value(metrics->body, "prefixd_gpu_kv_bytes"), 0);
  }
  EXPECT_EQ(stats.body["tiers"]["device"]["gpu_bytes"].get<double>(), metric_value(metrics->body, "prefixd_prompt_cache_gpu_bytes"));
}

class GpuPath : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (gpu_tests_skipped()) GTEST_SKIP() << "PREFIXD_TEST_NO_GPU=1";
  }
};

// A prompt cached on the device is answered from the device, then (pushed out by other prompts)
// from host memory into the device, then after a restart from disk: each the cold answer. Two
// requests sharing the prompt's system part run at once.
TEST_P(GpuPath, WarmEqualsColdFromEveryTierIntoDeviceMemory) {
  const std::string preset = GetParam();
  const std::string model = preset == "tiny" ? std::string(PREFIXD_TINY_MODEL) : kModels + "/" + preset + ".gguf";
  const fs::path disk = fs::temp_directory_path() / std::format("prefixd-gpu-{}-{}", ::getpid(), preset);
  fs::remove_all(disk);
  const json request = chat(words(90, 1), words(12, 2));
  std::map<std::string, int> tiers;  // the tiers the warm answers came from
  std::string cold;  // the answer every warm one must give
  {
    // A device tier of 256 idle cells: three other prompts push the first to the host.
    ServerProcess server(gpu_server(model, {"--cache-disk-path", disk.string(), "--prompt-cache-device-cells", "256"}));
    expect_on_the_device(server, 256);
    const std::string family = get_json(*server.client(), "/v1/cache/stats").body["family"].get<std::string>();
    // On ggml's Vulkan backend a recurrent or hybrid model's prompt computed in pieces (the cache
    // checkpoints it at turn boundaries) need not end in the same bits as one computed whole
    // (cache_prompt:false), as it does on the CPU: their warm answers are compared with the cached
    // cold run, and a difference from the whole one is printed.
    const bool whole_equals_pieces = family == "dense" || family == "sliding_window";
    auto client = server.client();
    std::int64_t reused = 0;
    const std::string whole = ask(*client, request, false).text;
    const Answer first = ask(*client, request);
    cold = whole_equals_pieces ? whole : first.text;
    EXPECT_EQ(first.text, cold) << "two cold runs";
    if (first.text != whole) std::printf("gpu path %s: cold in pieces %s, whole %s\n", preset.c_str(), first.text.c_str(), whole.c_str());
    const Answer device = ask(*client, request);
    EXPECT_EQ(device.text, cold) << "from " << device.tier;
    EXPECT_EQ(device.cached, device.prompt - 1);
    tiers[device.tier] += 1;
    reused += first.cached + device.cached;
    // Other prompts take the device tier's cells (ctx/2 on a GPU), pushing the first to the host.
    for (int other = 3; other < 6; ++other) reused += ask(*client, chat(words(110, other), words(8, other))).cached;
    const Answer host = ask(*client, request);
    EXPECT_EQ(host.text, cold) << "from " << host.tier;
    EXPECT_GT(host.cached, 0);
    tiers[host.tier] += 1;
    reused += host.cached;
    // Two requests with the same system prompt at once, each a new question.
    std::vector<Answer> together(2);
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i] {
        auto own = server.client();
        json shared = request;
        shared["messages"][1]["content"] = words(10, 20 + i);
        together[static_cast<size_t>(i)] = ask(*own, shared);
      });
    }
    for (auto& t : threads) t.join();
    for (const Answer& a : together) {
      EXPECT_GT(a.prompt, 0);
      reused += a.cached;
    }
    expect_counts_agree(server, reused);
    EXPECT_EQ(server.log().find("decode failed"), std::string::npos) << server.log();
  }
  {
    ServerProcess server(gpu_server(model, {"--cache-disk-path", disk.string()}));
    expect_on_the_device(server, 2048 / 2);  // the default device-tier budget on a GPU
    auto client = server.client();
    const Answer restored = ask(*client, request);
    EXPECT_EQ(restored.text, cold) << "from " << restored.tier;
    EXPECT_GT(restored.cached, 0) << "nothing came back from disk";
    tiers[restored.tier] += 1;
    expect_counts_agree(server, restored.cached);
  }
  fs::remove_all(disk);
  std::string reached;
  for (const auto& [tier, n] : tiers) reached += std::format("{}={} ", tier, n);
  std::printf("gpu path %s: warm answers from %s\n", preset.c_str(), reached.c_str());
  EXPECT_TRUE(tiers.contains("disk")) << reached;
  if (preset != "mamba2-tiny") {
    EXPECT_TRUE(tiers.contains("device")) << reached;
    EXPECT_TRUE(tiers.contains("host")) << reached;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, GpuPath, ::testing::Values("tiny", "gemma3-tiny", "qwen35-tiny", "mamba2-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::erase(name, '-');
                           return name;
                         });

// --deterministic with every layer on the device: each sequence's rows in a call are padded to the
// size from which the device computes a row alike (measured on the model at startup), in a KV
// stream per sequence. Four sessions at once then answer as their cold twins, and a request answers
// after them as on the empty server. (Without --deterministic, on lavapipe, the same sessions
// answered unlike their cold twins in some turns; docs/operator-guide.md, "Exactness on a GPU".)
// `sessions` sessions of `turns` turns at once on a server of `config` (every layer on the device,
// --parallel 4), which pads its calls, each turn warm against cold.
void expect_padded_sessions_as_cold(ServerConfig config, int sessions, int turns) {
  config.parallel = 4;
  config.ctx_size = 4096;
  ServerProcess server(config);
  const std::string log = server.log();
  ASSERT_NE(log.find("in device memory"), std::string::npos) << log;
  ASSERT_NE(log.find("deterministic on a GPU: each sequence's rows in a call are padded"), std::string::npos) << log;
  expect_answers_as_cold(run_sessions_at_once(server, sessions, turns));
  EXPECT_EQ(server.log().find("decode failed"), std::string::npos) << server.log();
}

TEST(GpuPathDeterministic, SessionsAtOnceAnswerAsColdOnesWithCallsPadded) {
  if (gpu_tests_skipped()) GTEST_SKIP() << "PREFIXD_TEST_NO_GPU=1";
  expect_padded_sessions_as_cold(gpu_server(PREFIXD_TINY_MODEL, {"--deterministic"}), 4, 3);
}

// The same on a sliding-window model, whose window layers keep every cell of a sequence's stream
// there, resumed at kept states.
TEST(GpuPathDeterministic, SlidingWindowSessionsAtOnceAnswerAsColdOnesWithCallsPadded) {
  if (gpu_tests_skipped()) GTEST_SKIP() << "PREFIXD_TEST_NO_GPU=1";
#if defined(__SANITIZE_ADDRESS__)
  // 13 minutes under the sanitizers (measured), lavapipe's JIT and its allocations included. The
  // same paths run there in the dense preset's test above and the CPU streams tests.
  GTEST_SKIP() << "lavapipe under the sanitizers: too slow for the suite";
#endif
  // A smaller batch makes the startup measurement's largest calls 128 rows (lavapipe measures the
  // rule on this model in about 40 s so, 62 s at the default 512; far longer under the sanitizers).
  ServerConfig config =
      gpu_server(std::string(PREFIXD_TEST_MODELS_DIR) + "/gemma3-tiny.gguf", {"--deterministic", "--batch-size", "128"});
  config.startup_seconds = 600;
  expect_padded_sessions_as_cold(config, 3, 2);
}

// A 24-bit BMP whose pixels follow (x, y).
std::string bmp(int width, int height) {
  const int row = (width * 3 + 3) / 4 * 4;
  std::string out = "BM";
  auto put = [&](std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  put(static_cast<std::uint32_t>(54 + row * height), 4);
  put(0, 4);
  put(54, 4);
  put(40, 4);
  put(static_cast<std::uint32_t>(width), 4);
  put(static_cast<std::uint32_t>(height), 4);
  put(1, 2);
  put(24, 2);
  put(0, 4);
  put(static_cast<std::uint32_t>(row * height), 4);
  put(2835, 4);
  put(2835, 4);
  put(0, 4);
  put(0, 4);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      out.push_back(static_cast<char>(x * 9));
      out.push_back(static_cast<char>(y * 5));
      out.push_back(static_cast<char>(x * y));
    }
    out.append(static_cast<size_t>(row - width * 3), '\0');
  }
  return out;
}

// The projector encodes on the device too (it follows the model there), and a chat with an image
// answers the same warm and cold.
TEST(GpuImages, TheImageEncoderRunsOnTheDeviceAndWarmEqualsCold) {
  if (gpu_tests_skipped()) GTEST_SKIP() << "PREFIXD_TEST_NO_GPU=1";
  ServerProcess server(gpu_server(PREFIXD_TINY_MODEL, {"--mmproj", kModels + "/tiny-mmproj.gguf"}));
  expect_on_the_device(server, 2048 / 2);  // the default
  auto client = server.client();
  const json request = {
      {"messages", json::array({{{"role", "system"}, {"content", words(60, 4)}},
                                {{"role", "user"},
                                 {"content", json::array({{{"type", "text"}, {"text", "What is this?"}},
                                                          {{"type", "image_url"},
                                                           {"image_url", {{"url", "data:image/bmp;base64," +
                                                                                      api::encode_base64(bmp(32, 24))}}}}})}}})},
      {"max_tokens", 1},
      {"temperature", 0}};
  const Answer cold = ask(*client, request, false);
  const Answer first = ask(*client, request);
  const Answer warm = ask(*client, request);
  EXPECT_EQ(first.text, cold.text);
  EXPECT_EQ(warm.text, cold.text);
  EXPECT_EQ(warm.cached, warm.prompt - 1);
  const std::string log = server.log();
  EXPECT_NE(log.find("the image encoder on the GPU"), std::string::npos) << log;
}

}  // namespace
}  // namespace prefixd::testing
