// Images and audio in the Responses API on the real server: input_image and input_audio parts are
// the same media as chat's image_url and input_audio parts (the same prompt, the same cache
// entries), a previous_response_id continuation carries its history's media and resumes after
// them, and every part it cannot use is a 400 naming the field.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "media_requests.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

const std::string kModels = PREFIXD_TEST_MODELS_DIR;
const std::string kSystem = "You are a careful assistant who looks at pictures and listens to recordings.";

json chat_with(const json& part, const std::string& question) {
  return {{"messages", json::array({{{"role", "system"}, {"content", kSystem}},
                                    {{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", question}}, part})}}})},
          {"max_tokens", 6},
          {"temperature", 0}};
}

json response_with(const json& part, const std::string& question) {
  return {{"instructions", kSystem},
          {"input", json::array({{{"role", "user"},
                                  {"content", json::array({{{"type", "input_text"}, {"text", question}}, part})}}})},
          {"max_output_tokens", 6},
          {"temperature", 0}};
}

std::string output_text(const json& response) { return response["output"][0]["content"][0]["text"].get<std::string>(); }

JsonReply respond(httplib::Client& client, const json& request) { return post_json(client, "/v1/responses", request); }

TEST(ResponsesMedia, AnInputImageIsTheChatImageAndAContinuationResumesAfterIt) {
  ServerProcess server({.extra_args = {"--mmproj", kModels + "/tiny-mmproj.gguf"}});
  auto client = server.client();
  const std::string url = data_url(bmp(40, 30, 5));
  const json first = chat(*client, chat_with({{"type", "image_url"}, {"image_url", {{"url", url}}}}, "What is in this picture?"));
  const int prompt = first["usage"]["prompt_tokens"].get<int>();

  const auto reply = respond(*client, response_with({{"type", "input_image"}, {"image_url", url}}, "What is in this picture?"));
  ASSERT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(reply.body["usage"]["input_tokens"].get<int>(), prompt) << reply.raw;
  EXPECT_EQ(reply.body["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), prompt - 1) << reply.raw;
  EXPECT_EQ(reply.body["prompt_cache"]["images"]["cached"], 1) << reply.raw;
  EXPECT_EQ(output_text(reply.body), content(first));

  // The next turn names the stored response: its image comes along, cached, not encoded again.
  const auto next = respond(*client, {{"previous_response_id", reply.body["id"]},
                                      {"instructions", kSystem},
                                      {"input", "And which colour is most common?"},
                                      {"max_output_tokens", 6},
                                      {"temperature", 0}});
  ASSERT_EQ(next.status, 200) << next.raw;
  EXPECT_EQ(next.body["prompt_cache"]["images"]["count"], 1) << next.raw;
  EXPECT_EQ(next.body["prompt_cache"]["images"]["encoded"], 0) << next.raw;
  EXPECT_GE(next.body["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), prompt - 1) << next.raw;
  // A continuation whose own text spells the marker would misplace the history's image.
  const auto spelled = respond(*client, {{"previous_response_id", next.body["id"]},
                                         {"input", "What does <__media__> mean?"},
                                         {"max_output_tokens", 2}});
  EXPECT_EQ(spelled.status, 400) << spelled.raw;
  EXPECT_EQ(spelled.body["error"]["param"], "input") << spelled.raw;
}

TEST(ResponsesMedia, AnInputAudioIsTheChatClip) {
  ServerProcess server({.extra_args = {"--mmproj", kModels + "/tiny-qwen2a-mmproj.gguf"}});
  auto client = server.client();
  const json part = {{"type", "input_audio"}, {"input_audio", {{"data", base64(wav(2.0, 440))}, {"format", "wav"}}}};
  const json first = chat(*client, chat_with(part, "What do you hear?"));
  const int prompt = first["usage"]["prompt_tokens"].get<int>();
  const auto reply = respond(*client, response_with(part, "What do you hear?"));
  ASSERT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(reply.body["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), prompt - 1) << reply.raw;
  EXPECT_EQ(reply.body["prompt_cache"]["images"]["encoded"], 0) << reply.raw;
  EXPECT_EQ(output_text(reply.body), content(first));
}

TEST(ResponsesMedia, EveryPartItCannotUseIsA400NamingTheField) {
  ServerProcess server({.extra_args = {"--mmproj", kModels + "/tiny-mmproj.gguf"}});
  auto client = server.client();
  const std::string part = "input[0].content[1]";
  struct Case {
    std::string what;
    json part;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"a stored file", {{"type", "input_image"}, {"file_id", "file-123"}}, part + ".file_id"},
      {"no image_url", {{"type", "input_image"}}, part + ".image_url"},
      {"a remote URL", {{"type", "input_image"}, {"image_url", "https://example.com/a.png"}}, part + ".image_url"},
      {"not an image", {{"type", "input_image"}, {"image_url", data_url("plain text")}}, part},
      {"audio on an image projector",
       {{"type", "input_audio"}, {"input_audio", {{"data", base64(wav(1.0, 440))}, {"format", "wav"}}}}, part},
      {"a file part", {{"type", "input_file"}, {"file_data", "x"}}, part + ".type"},
  };
  for (const Case& c : cases) {
    const auto reply = respond(*client, response_with(c.part, "Look at this."));
    EXPECT_EQ(reply.status, 400) << c.what << ": " << reply.raw;
    EXPECT_EQ(reply.body["error"]["param"], c.param) << c.what << ": " << reply.raw;
  }
  EXPECT_EQ(respond(*client, response_with({{"type", "input_image"}, {"image_url", data_url(bmp(8, 8, 1))}}, "Look.")).status, 200);

  ServerProcess text_only;
  const auto refused = respond(*text_only.client(), response_with({{"type", "input_image"}, {"image_url", data_url(bmp(8, 8, 1))}}, "Look."));
  EXPECT_EQ(refused.status, 400) << refused.raw;
  EXPECT_EQ(refused.body["error"]["param"], part) << refused.raw;
  EXPECT_NE(refused.body["error"]["message"].get<std::string>().find("--mmproj"), std::string::npos) << refused.raw;
}

}  // namespace
}  // namespace prefixd::testing
