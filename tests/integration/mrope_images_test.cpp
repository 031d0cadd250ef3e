// Images on M-RoPE models (Qwen2-VL, Qwen2.5-VL and Qwen3-VL text models; Qwen3.5's hybrid) through the real
// server: an image's tokens share one position and the text after it resumes by the image grid's
// longer side, so a token's index is not its position. A prefix after an image (and after two) is
// reused exactly, warm = cold, from the device tier, from host segments whose boundaries fall
// inside the image, and from disk after a restart; another image shares nothing past its first
// position; the image is encoded once per digest.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <filesystem>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "bench/server_process.h"
#include "llama_server_peer.h"
#include "media_requests.h"
#include "valkey_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kModels = PREFIXD_TEST_MODELS_DIR;

const std::string kSystem = "You are a careful assistant who looks at pictures and answers questions about them.";

json user_turn(const std::string& question, const std::string& image_url) {
  return {{"role", "user"},
          {"content", json::array({{{"type", "text"}, {"text", question}},
                                   {{"type", "image_url"}, {"image_url", {{"url", image_url}}}}})}};
}

json image_chat(const std::string& image_url) {
  return {{"messages", json::array({{{"role", "system"}, {"content", kSystem}}, user_turn("What is in this picture?", image_url)})},
          {"max_tokens", 8},
          {"temperature", 0}};
}

json without_cache(json request) {
  request["cache_prompt"] = false;
  return request;
}

json in_session(json request, const std::string& session) {
  request["prompt_cache_key"] = session;
  return request;
}

struct MropeModel {
  std::string name;
  std::string model;
  std::string projector;
  int width = 0;  // the test image; Qwen-VL projectors: one token per 28 x 28 pixels
  int height = 0;
  std::vector<std::string> extra_args;
};

void PrintTo(const MropeModel& m, std::ostream* os) { *os << m.name; }

class MropeImages : public ::testing::TestWithParam<MropeModel> {};

TEST_P(MropeImages, APrefixAfterImagesIsReusedExactlyAndAnotherImageSharesNothingPastIt) {
  const MropeModel& m = GetParam();
  std::vector<std::string> args = {"--mmproj", kModels + "/" + m.projector};
  args.insert(args.end(), m.extra_args.begin(), m.extra_args.end());
  ServerProcess server({.model = kModels + "/" + m.model, .extra_args = args, .ctx_size = 8192});
  auto client = server.client();
  EXPECT_NE(server.log().find("M-RoPE"), std::string::npos) << "the model should place image tokens by M-RoPE";

  const json first = image_chat(data_url(bmp(m.width, m.height, 1)));
  const ImagePlace place = image_place(*client, first);
  ASSERT_GT(place.begin, 0);
  ASSERT_GT(place.tokens, 0);

  const json cold = chat(*client, without_cache(first));
  const int prompt = cold["usage"]["prompt_tokens"].get<int>();
  const json warm = chat(*client, first);
  EXPECT_EQ(content(warm), content(cold));

  // The same image in another session: everything but the last token, image included.
  const json again = chat(*client, in_session(first, "another"));
  EXPECT_EQ(again["prompt_cache"]["cached_tokens"].get<int>(), prompt - 1) << again["prompt_cache"].dump();
  EXPECT_EQ(again["prompt_cache"]["images"]["cached"], 1);
  EXPECT_EQ(again["prompt_cache"]["images"]["encoded"], 0);
  EXPECT_EQ(content(again), content(cold));

  // Another image after the same text: nothing past its first position.
  const json other = chat(*client, image_chat(data_url(bmp(m.width, m.height, 2))));
  EXPECT_EQ(other["prompt_cache"]["cached_tokens"].get<int>(), place.begin) << other["prompt_cache"].dump();
  EXPECT_EQ(other["prompt_cache"]["images"]["encoded"], 1);

  // A second turn with a second image: resumed past the first one, and computed as a cold run
  // computes it, in this session and (everything but the last token) in another.
  json second = first;
  second["messages"].push_back({{"role", "assistant"}, {"content", content(cold)}});
  second["messages"].push_back(user_turn("And this one, is it brighter?", data_url(bmp(m.height, m.width, 3))));
  const json second_cold = chat(*client, without_cache(second));
  const int second_prompt = second_cold["usage"]["prompt_tokens"].get<int>();
  const json second_warm = chat(*client, second);
  EXPECT_GE(second_warm["prompt_cache"]["cached_tokens"].get<int>(), place.begin + place.tokens)
      << second_warm["prompt_cache"].dump();
  EXPECT_EQ(second_warm["prompt_cache"]["images"]["encoded"], 0) << "both images' embeddings are kept";
  EXPECT_EQ(content(second_warm), content(second_cold));
  const json second_again = chat(*client, in_session(second, "a third"));
  EXPECT_EQ(second_again["prompt_cache"]["cached_tokens"].get<int>(), second_prompt - 1) << second_again["prompt_cache"].dump();
  EXPECT_EQ(second_again["prompt_cache"]["images"]["cached"], 2);
  EXPECT_EQ(content(second_again), content(second_cold));

  // Three images were encoded (two for the first turns, one new in the second); the responses,
  // the stats and the metrics agree.
  const json stats = get_json(*client, "/v1/cache/stats").body;
  EXPECT_EQ(stats["images"]["encoded"], 3) << stats["images"].dump();
  const std::string metrics = client->Get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "prefixd_images_encoded_total"), 3);
}

INSTANTIATE_TEST_SUITE_P(
    Models, MropeImages,
    ::testing::Values(
        // 600 tokens (30 x 20), 30 positions: the image crosses host segments of 256 tokens.
        MropeModel{"dense_qwen2vl", "tiny-qwen2vl.gguf", "tiny-qwen2vl-mmproj.gguf", 840, 560, {}},
        MropeModel{"dense_qwen2vl_device_tier", "tiny-qwen2vl.gguf", "tiny-qwen2vl-mmproj.gguf", 840, 560,
                   {"--prompt-cache-device-cells", "8192"}},
        // Every row computed alike (a lone row padded, rows in calls of their own): positions of pad rows too.
        MropeModel{"dense_qwen2vl_deterministic", "tiny-qwen2vl.gguf", "tiny-qwen2vl-mmproj.gguf", 448, 336, {"--deterministic"}},
        // A KV stream per sequence: copies between sequences go through saved states.
        MropeModel{"dense_qwen2vl_streams", "tiny-qwen2vl.gguf", "tiny-qwen2vl-mmproj.gguf", 448, 336, {"--no-kv-unified"}},
        MropeModel{"dense_qwen3vl", "tiny-qwen3vl.gguf", "tiny-qwen3vl-mmproj.gguf", 448, 352, {}},
        MropeModel{"dense_qwen25vl", "tiny-qwen2vl.gguf", "tiny-qwen25vl-mmproj.gguf", 448, 336, {}},
        MropeModel{"hybrid_qwen35", "qwen35-tiny.gguf", "tiny128-qwen2vl-mmproj.gguf", 448, 336, {}}),
    [](const auto& info) { return info.param.name; });

TEST(MropeImagesOnDisk, ARestartServesThePrefixAfterAnImageFromDiskAsAColdRunComputesIt) {
  std::string dir = "/tmp/prefixd-mrope-disk-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const ServerConfig config{.model = kModels + "/tiny-qwen2vl.gguf",
                            .extra_args = {"--mmproj", kModels + "/tiny-qwen2vl-mmproj.gguf", "--cache-disk-path", dir},
                            .ctx_size = 4096};
  const json request = image_chat(data_url(bmp(840, 560, 4)));
  std::string cold_text;
  int prompt = 0;
  {
    ServerProcess server(config);
    auto client = server.client();
    const json cold = chat(*client, without_cache(request));
    cold_text = content(cold);
    prompt = cold["usage"]["prompt_tokens"].get<int>();
    chat(*client, request);
    wait_for_disk_writes(*client);
  }
  ServerProcess restarted(config);
  auto client = restarted.client();
  const json warm = chat(*client, request);
  EXPECT_EQ(warm["prompt_cache"]["tier"], "disk") << warm["prompt_cache"].dump();
  EXPECT_EQ(warm["prompt_cache"]["cached_tokens"].get<int>(), prompt - 1) << warm["prompt_cache"].dump();
  EXPECT_EQ(warm["prompt_cache"]["images"]["cached"], 1);
  EXPECT_EQ(warm["prompt_cache"]["images"]["encoded"], 0);
  EXPECT_EQ(content(warm), cold_text);
  std::error_code ec;
  fs::remove_all(dir, ec);
}


// The positions are libmtmd's: on the same model, projector and image, prefixd's first token
// log-probabilities are llama-server's (the reference for libmtmd's placement), to the last digit
// they print. A position error moves them by whole units (resuming the text after the image at its
// token count instead of its grid: up to 1.8).
TEST(MropeImagesBesideLlamaServer, TheFirstTokenLogprobsAfterAnImageAreLlamaServers) {
  if (!have_program("llama-server")) GTEST_SKIP() << "llama-server is not on PATH (run through scripts/in-env)";
  for (const auto& [model, projector] : {std::pair{"tiny-qwen2vl.gguf", "tiny-qwen2vl-mmproj.gguf"},
                                         std::pair{"tiny-qwen3vl.gguf", "tiny-qwen3vl-mmproj.gguf"}}) {
    SCOPED_TRACE(model);
    const auto request = [](int shade) {
      json r = image_chat(data_url(bmp(448, 224, shade)));
      r["max_tokens"] = 1;
      r["logprobs"] = true;
      r["top_logprobs"] = 5;
      return r;
    };
    // Top-5 log-probabilities by shade; llama-server leaves out logprobs for a token that is a
    // lone byte of a UTF-8 character, so a shade may be missing on its side.
    const auto top5 = [&](httplib::Client& client) {
      std::map<int, std::vector<double>> out;
      for (int shade = 1; shade <= 6; ++shade) {
        const auto reply = post_json(client, "/v1/chat/completions", request(shade));
        EXPECT_EQ(reply.status, 200) << reply.raw;
        const json& logprobs = reply.body["choices"][0]["logprobs"];
        if (!logprobs.is_object()) continue;
        for (const json& top : logprobs["content"][0]["top_logprobs"]) out[shade].push_back(top["logprob"].get<double>());
      }
      return out;
    };
    std::map<int, std::vector<double>> ours;
    {
      ServerProcess server({.model = kModels + "/" + model, .extra_args = {"--mmproj", kModels + "/" + projector}, .parallel = 1,
                            .ctx_size = 4096});
      ours = top5(*server.client());
    }
    LlamaServerPeer peer({"-m", kModels + "/" + model, "--mmproj", kModels + "/" + projector, "-c", "4096", "-np", "1",
                          "-fa", "on"});
    const std::map<int, std::vector<double>> theirs = top5(*peer.client);
    int compared = 0;
    for (const auto& [shade, values] : theirs) {
      ASSERT_EQ(ours.count(shade), 1u) << "shade " << shade;
      ASSERT_EQ(ours[shade].size(), values.size());
      for (size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(ours[shade][i], values[i], 1e-3) << "shade " << shade << " rank " << i;
      compared += 1;
    }
    EXPECT_GE(compared, 3) << "too few prompts gave llama-server's log-probabilities";
  }
}

}  // namespace
}  // namespace prefixd::testing
