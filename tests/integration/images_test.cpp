// Images through the real server (--mmproj with a generated projector): an image is keyed by its
// pixels, so prompts with the same text and different images share nothing past the image and the
// same image reuses everything up to and past it, on a dense and a sliding-window model; kept
// embeddings spare the encoder; the disk tier carries image-bearing prefixes across a restart; and
// every malformed image part is a 400 naming it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "media_requests.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kModels = PREFIXD_TEST_MODELS_DIR;


const std::string kSystem =
    "You are a careful assistant who looks at pictures and answers questions about their colours, shapes and "
    "the objects they show.";

json image_chat(const std::string& image_url, const std::string& question = "What is in this picture?") {
  return {{"messages", json::array({{{"role", "system"}, {"content", kSystem}},
                                    {{"role", "user"},
                                     {"content", json::array({{{"type", "text"}, {"text", question}},
                                                              {{"type", "image_url"}, {"image_url", {{"url", image_url}}}}})}}})},
          {"max_tokens", 6},
          {"temperature", 0}};
}


struct VisionModel {
  std::string name;
  std::string model;
  std::string projector;
};

class ImageReuse : public ::testing::TestWithParam<VisionModel> {};

TEST_P(ImageReuse, AnotherImageSharesNothingPastItAndTheSameImageReusesTheWholePrefix) {
  const VisionModel& m = GetParam();
  ServerProcess server({.model = kModels + "/" + m.model, .extra_args = {"--mmproj", kModels + "/" + m.projector}});
  auto client = server.client();
  const std::string first_image = bmp(40, 30, 1);
  std::string changed = first_image;
  changed[200] = static_cast<char>(changed[200] ^ 0x01);  // one byte of one pixel

  const json a = image_chat(data_url(first_image));
  const ImagePlace place = image_place(*client, a);
  const int begin = place.begin;
  ASSERT_GT(begin, 0);
  ASSERT_GT(place.tokens, 0);

  const json cold = chat(*client, a);
  const int prompt = cold["usage"]["prompt_tokens"].get<int>();
  EXPECT_EQ(cold["prompt_cache"]["images"], json({{"count", 1}, {"cached", 0}, {"embeddings_reused", 0}, {"encoded", 1}}));

  // The same text with the changed image: reuse stops at or before the image's first position.
  const json other = chat(*client, image_chat(data_url(changed)));
  EXPECT_EQ(other["usage"]["prompt_tokens"].get<int>(), prompt);
  EXPECT_EQ(other["prompt_cache"]["cached_tokens"].get<int>(), begin) << other["prompt_cache"].dump();
  EXPECT_EQ(other["prompt_cache"]["images"]["cached"], 0);
  EXPECT_EQ(other["prompt_cache"]["images"]["encoded"], 1);

  // The first image again, in a new session: everything but the last token, image included.
  json again_request = a;
  again_request["prompt_cache_key"] = "another-session";
  const json again = chat(*client, again_request);
  EXPECT_EQ(again["prompt_cache"]["cached_tokens"].get<int>(), prompt - 1) << again["prompt_cache"].dump();
  EXPECT_EQ(again["prompt_cache"]["images"]["cached"], 1);
  EXPECT_EQ(again["prompt_cache"]["images"]["encoded"], 0);
  // Greedy output does not depend on where the prefix came from.
  EXPECT_EQ(content(again), content(cold));

  // A second question about the same image resumes after it without encoding it again.
  json follow = a;
  follow["messages"].push_back({{"role", "assistant"}, {"content", content(cold)}});
  follow["messages"].push_back({{"role", "user"}, {"content", "And which colour is most common?"}});
  const json second_turn = chat(*client, follow);
  EXPECT_GE(second_turn["prompt_cache"]["cached_tokens"].get<int>(), begin + place.tokens)
      << second_turn["prompt_cache"].dump();
  EXPECT_EQ(second_turn["prompt_cache"]["images"]["encoded"], 0);

  const json stats = get_json(*client, "/v1/cache/stats").body;
  EXPECT_EQ(stats["images"]["encoded"], 2) << stats["images"].dump();
  EXPECT_EQ(stats["images"]["embeddings"], 2);
  const std::string metrics = client->Get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "prefixd_images_encoded_total"), 2);
  EXPECT_EQ(metric_value(metrics, "prefixd_images_total"), 4);
  EXPECT_EQ(metric_value(metrics, "prefixd_images_cached_total"), 2);
}

TEST_P(ImageReuse, AfterACacheResetTheImageIsComputedFromItsKeptEmbeddings) {
  const VisionModel& m = GetParam();
  ServerProcess server({.model = kModels + "/" + m.model, .extra_args = {"--mmproj", kModels + "/" + m.projector}});
  auto client = server.client();
  const json a = image_chat(data_url(bmp(32, 32, 9)));
  const json cold = chat(*client, a);
  ASSERT_EQ(post_json(*client, "/v1/cache/reset", json::object()).status, 200);
  const json recomputed = chat(*client, a);
  EXPECT_EQ(recomputed["prompt_cache"]["cached_tokens"], 0) << recomputed["prompt_cache"].dump();
  EXPECT_EQ(recomputed["prompt_cache"]["images"]["embeddings_reused"], 1);
  EXPECT_EQ(recomputed["prompt_cache"]["images"]["encoded"], 0);
  EXPECT_EQ(content(recomputed), content(cold));
  EXPECT_EQ(metric_value(client->Get("/metrics")->body, "prefixd_image_embedding_hits_total"), 1);
}

INSTANTIATE_TEST_SUITE_P(Models, ImageReuse,
                         ::testing::Values(VisionModel{"dense", "tiny.gguf", "tiny-mmproj.gguf"},
                                           VisionModel{"dense_qwen3vl", "tiny.gguf", "tiny-qwen3vl-mmproj.gguf"},
                                           VisionModel{"sliding_window", "gemma3-tiny.gguf", "gemma3-tiny-mmproj.gguf"},
                                           VisionModel{"hybrid", "archs/jamba-dense.gguf", "tiny256-mmproj.gguf"},
                                           VisionModel{"recurrent", "mamba2-tiny.gguf", "gemma3-tiny-mmproj.gguf"}),
                         [](const auto& info) { return info.param.name; });

TEST(Images, ARestartWithTheDiskTierServesTheImagePrefixFromDisk) {
  std::string dir = "/tmp/prefixd-images-disk-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const ServerConfig config{.extra_args = {"--mmproj", kModels + "/tiny-mmproj.gguf", "--cache-disk-path", dir}};
  const json a = image_chat(data_url(bmp(40, 30, 4)));
  std::string cold_text;
  int prompt = 0;
  {
    ServerProcess server(config);
    auto client = server.client();
    const json cold = chat(*client, a);
    cold_text = content(cold);
    prompt = cold["usage"]["prompt_tokens"].get<int>();
    wait_for_disk_writes(*client);
  }
  ServerProcess restarted(config);
  auto client = restarted.client();
  const json warm = chat(*client, a);
  EXPECT_EQ(warm["prompt_cache"]["tier"], "disk") << warm["prompt_cache"].dump();
  EXPECT_GE(warm["prompt_cache"]["cached_tokens"].get<int>(), prompt - 40) << warm["prompt_cache"].dump();
  EXPECT_EQ(warm["prompt_cache"]["images"]["cached"], 1);
  EXPECT_EQ(warm["prompt_cache"]["images"]["encoded"], 0);
  EXPECT_EQ(content(warm), cold_text);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(Images, EveryImageItCannotUseIsA400NamingThePart) {
  ServerProcess server({.extra_args = {"--mmproj", kModels + "/tiny-mmproj.gguf", "--max-image-bytes", "100000",
                                       "--max-images", "2", "--max-image-pixels", "1000000"}});
  auto client = server.client();
  const std::string part = "messages[1].content[1]";
  struct Case {
    std::string what;
    json request;
    std::string param;
    std::string says;
  };
  const std::string png_header = std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16) + std::string("\0\0\x10\0\0\0\x10\0", 8);
  std::vector<Case> cases = {
      {"a remote URL", image_chat("https://example.com/cat.png"), part + ".image_url.url", "fetches nothing"},
      {"not base64", image_chat("data:image/png;base64,@@@@"), part + ".image_url.url", "not valid base64"},
      {"not a data URL of an image", image_chat("data:text/plain;base64," + base64("hello")), part + ".image_url.url",
       "only images"},
      {"too large", image_chat(data_url(std::string(200000, 'x'))), part + ".image_url.url", "larger than 100000 bytes"},
      {"not an image", image_chat(data_url("just some text, not a picture")), part, "supported format"},
      {"WebP", image_chat(data_url(std::string("RIFF\0\0\0\0WEBPVP8 ", 16))), part, "WebP"},
      {"a damaged PNG", image_chat(data_url(std::string("\x89PNG\r\n\x1a\n\0\0", 10))), part, "malformed PNG"},
      {"a truncated PNG", image_chat(data_url(std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x10\0\0\0\x10", 24))),
       part, "cannot read"},
      {"too many pixels", image_chat(data_url(png_header)), part, "more than the 1000000"},
  };
  json three = image_chat(data_url(bmp(8, 8, 1)));
  for (int i = 0; i < 2; ++i) three["messages"][1]["content"].push_back({{"type", "image_url"}, {"image_url", {{"url", data_url(bmp(8, 8, i))}}}});
  cases.push_back({"one image too many", three, "messages[1].content[3]", "at most 2 images"});
  json marker = image_chat(data_url(bmp(8, 8, 1)), "Compare <__media__> with this:");
  cases.push_back({"the marker in the text", marker, "messages", "stands for an image"});
  for (const Case& c : cases) {
    const auto reply = post_json(*client, "/v1/chat/completions", c.request);
    EXPECT_EQ(reply.status, 400) << c.what << ": " << reply.raw;
    EXPECT_EQ(reply.body["error"]["param"], c.param) << c.what << ": " << reply.raw;
    EXPECT_NE(reply.body["error"]["message"].get<std::string>().find(c.says), std::string::npos) << c.what << ": " << reply.raw;
  }
  // The server served nothing wrong and still answers.
  EXPECT_EQ(post_json(*client, "/v1/chat/completions", image_chat(data_url(bmp(8, 8, 1)))).status, 200);
}

TEST(Images, AMessagesImageBlockIsTheSameImageAsAChatImagePart) {
  ServerProcess server({.extra_args = {"--mmproj", kModels + "/tiny-mmproj.gguf"}});
  auto client = server.client();
  const std::string image = bmp(40, 30, 6);
  const json chat_request = image_chat(data_url(image));
  const json first = chat(*client, chat_request);
  // The same conversation as a Message: the image as a base64 block.
  const json message = {
      {"model", "tiny"},
      {"max_tokens", 6},
      {"temperature", 0},
      {"system", kSystem},
      {"messages", json::array({{{"role", "user"},
                                 {"content", json::array({{{"type", "text"}, {"text", "What is in this picture?"}},
                                                          {{"type", "image"},
                                                           {"source", {{"type", "base64"}, {"media_type", "image/bmp"},
                                                                       {"data", base64(image)}}}}})}}})}};
  const auto reply = post_json(*client, "/v1/messages", message);
  ASSERT_EQ(reply.status, 200) << reply.raw;
  const int prompt = first["usage"]["prompt_tokens"].get<int>();
  EXPECT_EQ(reply.body["usage"]["cache_read_input_tokens"].get<int>(), prompt - 1) << reply.raw;
  EXPECT_EQ(reply.body["prompt_cache"]["images"]["cached"], 1) << reply.raw;
  EXPECT_EQ(reply.body["content"][0]["text"], content(first));

  json by_url = message;
  by_url["messages"][0]["content"][1]["source"] = {{"type", "url"}, {"url", "https://example.com/a.png"}};
  const auto refused = post_json(*client, "/v1/messages", by_url);
  EXPECT_EQ(refused.status, 400) << refused.raw;
  EXPECT_EQ(refused.body["error"]["type"], "invalid_request_error") << refused.raw;
  EXPECT_NE(refused.body["error"]["message"].get<std::string>().find("messages[0].content[1].source"), std::string::npos)
      << refused.raw;
}

TEST(Images, AServerWithoutAProjectorRefusesImagesAndSaysHowToServeThem) {
  ServerProcess server;
  auto client = server.client();
  const auto reply = post_json(*client, "/v1/chat/completions", image_chat(data_url(bmp(8, 8, 1))));
  EXPECT_EQ(reply.status, 400) << reply.raw;
  EXPECT_EQ(reply.body["error"]["param"], "messages[1].content[1]");
  EXPECT_NE(reply.body["error"]["message"].get<std::string>().find("--mmproj"), std::string::npos) << reply.raw;
}

}  // namespace
}  // namespace prefixd::testing
