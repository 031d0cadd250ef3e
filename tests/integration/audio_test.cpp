// Audio through the real server (--mmproj with a generated Qwen2-Audio projector, on a dense, a
// sliding-window, a recurrent and a hybrid M-RoPE model): an input_audio part is keyed by its
// decoded sound, so the same clip reuses everything up to and past it, warm = cold, and another
// clip shares nothing past its first position; a second turn resumes after the clip without
// encoding it again; every malformed audio part is a 400 naming its field, and a server without an
// audio encoder says so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "media_requests.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

const std::string kModels = PREFIXD_TEST_MODELS_DIR;
const std::string kAudioProjector = kModels + "/tiny-qwen2a-mmproj.gguf";

json audio_part(const std::string& bytes, const std::string& format = "wav") {
  return {{"type", "input_audio"}, {"input_audio", {{"data", api::encode_base64(bytes)}, {"format", format}}}};
}

json audio_chat(const json& part, const std::string& question = "What do you hear in this recording?") {
  return {{"messages", json::array({{{"role", "system"}, {"content", "You listen to recordings and describe them."}},
                                    {{"role", "user"},
                                     {"content", json::array({{{"type", "text"}, {"text", question}}, part})}}})},
          {"max_tokens", 6},
          {"temperature", 0}};
}


// Where the clip's positions begin, and how many: its stand-in (negative) ids in /tokenize.
std::pair<int, int> clip_place(httplib::Client& client, const json& request) {
  const auto reply = post_json(client, "/tokenize", {{"messages", request["messages"]}});
  EXPECT_EQ(reply.status, 200) << reply.raw;
  int begin = -1, count = 0;
  const json& tokens = reply.body["tokens"];
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].get<int>() >= 0) continue;
    if (begin < 0) begin = static_cast<int>(i);
    count += 1;
  }
  return {begin, count};
}

struct AudioModel {
  std::string name;
  std::string model;
  std::string projector;
};

class AudioReuse : public ::testing::TestWithParam<AudioModel> {};

TEST_P(AudioReuse, AClipIsKeyedByItsSoundAndAnsweredAlikeWarmAndCold) {
  const AudioModel& m = GetParam();
  ServerProcess server({.model = kModels + "/" + m.model, .extra_args = {"--mmproj", kModels + "/" + m.projector},
                        .ctx_size = 4096});
  auto client = server.client();
  const json a = audio_chat(audio_part(wav(1.0, 440)));
  const auto [begin, tokens] = clip_place(*client, a);
  ASSERT_GT(begin, 0);
  EXPECT_EQ(tokens, 750) << "one 30-second window of the Qwen2-Audio encoder";

  json uncached = a;
  uncached["cache_prompt"] = false;
  const json cold = chat(*client, uncached);
  const json first = chat(*client, a);
  const int prompt = first["usage"]["prompt_tokens"].get<int>();
  EXPECT_GT(prompt, begin + tokens);
  EXPECT_EQ(content(first), content(cold));

  // The same clip again, in another session: everything but the last token, the clip included.
  json again_request = a;
  again_request["prompt_cache_key"] = "another-session";
  const json again = chat(*client, again_request);
  EXPECT_EQ(again["prompt_cache"]["cached_tokens"].get<int>(), prompt - 1) << again["prompt_cache"].dump();
  EXPECT_EQ(again["prompt_cache"]["images"]["encoded"], 0) << "the clip's positions came from the cache";
  EXPECT_EQ(content(again), content(cold)) << "warm = cold";

  // Another sound with the same text: reuse stops at the clip's first position.
  const json other = chat(*client, audio_chat(audio_part(wav(1.0, 660))));
  EXPECT_EQ(other["prompt_cache"]["cached_tokens"].get<int>(), begin) << other["prompt_cache"].dump();
  EXPECT_EQ(other["prompt_cache"]["images"]["encoded"], 1);

  // A follow-up resumes after the clip without encoding it again.
  json follow = a;
  follow["messages"].push_back({{"role", "assistant"}, {"content", content(first)}});
  follow["messages"].push_back({{"role", "user"}, {"content", "Is it a voice or an instrument?"}});
  const json second_turn = chat(*client, follow);
  EXPECT_GE(second_turn["prompt_cache"]["cached_tokens"].get<int>(), begin + tokens) << second_turn["prompt_cache"].dump();
  EXPECT_EQ(second_turn["prompt_cache"]["images"]["encoded"], 0);
  json follow_cold = follow;
  follow_cold["cache_prompt"] = false;
  EXPECT_EQ(content(chat(*client, follow_cold)), content(second_turn)) << "warm = cold on the second turn";
}

// A dense model, and the families that resume only where a state is kept (checkpoints at a clip's
// edges): a sliding-window model and a recurrent one.
INSTANTIATE_TEST_SUITE_P(EveryFamily, AudioReuse,
                         ::testing::Values(AudioModel{"dense", "tiny.gguf", "tiny-qwen2a-mmproj.gguf"},
                                           AudioModel{"sliding_window", "gemma3-tiny.gguf", "tiny128-qwen2a-mmproj.gguf"},
                                           AudioModel{"recurrent", "mamba2-tiny.gguf", "tiny128-qwen2a-mmproj.gguf"},
                                           // Qwen3.5's layout: attention beside a recurrent state, M-RoPE positions.
                                           AudioModel{"hybrid_mrope", "qwen35-tiny.gguf", "tiny128-qwen2a-mmproj.gguf"}),
                         [](const ::testing::TestParamInfo<AudioModel>& info) { return info.param.name; });

TEST(Audio, EveryBadAudioPartIsA400NamingItsField) {
  ServerProcess server({.extra_args = {"--mmproj", kAudioProjector, "--max-audio-seconds", "2"}, .ctx_size = 4096});
  auto client = server.client();
  const std::string part = "messages[1].content[1]";
  struct Case {
    std::string what;
    json part;
    std::string param;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"no input_audio object", {{"type", "input_audio"}}, part + ".input_audio", "must be an object"},
      {"no data", {{"type", "input_audio"}, {"input_audio", {{"format", "wav"}}}}, part + ".input_audio.data", "must be a string"},
      {"an unknown format", audio_part(wav(0.5, 440), "ogg"), part + ".input_audio.format", "\"wav\", \"mp3\" or \"flac\""},
      {"not base64",
       {{"type", "input_audio"}, {"input_audio", {{"data", "@@@@"}, {"format", "wav"}}}},
       part + ".input_audio.data",
       "not valid base64"},
      {"not the format named", audio_part("just some text, not a recording"), part + ".input_audio.data", "not a wav file"},
      {"mp3 named, wav sent", audio_part(wav(0.5, 440), "mp3"), part + ".input_audio.data", "not a mp3 file"},
      {"a damaged wav", audio_part(std::string("RIFF\x10\0\0\0WAVEjunkjunkjunk", 24)), part, "cannot read"},
      {"longer than --max-audio-seconds", audio_part(wav(3.0, 440)), part, "--max-audio-seconds"},
      {"an image to an audio-only projector",
       {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + api::encode_base64("x")}}}},
       part,
       "no vision encoder"},
  };
  for (const Case& c : cases) {
    const auto reply = post_json(*client, "/v1/chat/completions", audio_chat(c.part));
    EXPECT_EQ(reply.status, 400) << c.what << ": " << reply.raw;
    EXPECT_EQ(reply.body["error"]["param"], c.param) << c.what << ": " << reply.raw;
    EXPECT_NE(reply.body["error"]["message"].get<std::string>().find(c.says), std::string::npos) << c.what << ": " << reply.raw;
  }
  // The server lost nothing and still answers.
  EXPECT_EQ(post_json(*client, "/v1/chat/completions", audio_chat(audio_part(wav(0.5, 440)))).status, 200);
}

TEST(Audio, AServerWithoutAnAudioEncoderRefusesAudioAndSaysWhy) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, std::vector<std::string>{"--mmproj", kModels + "/tiny-mmproj.gguf"}}) {
    ServerProcess server({.extra_args = args});
    auto client = server.client();
    const auto reply = post_json(*client, "/v1/chat/completions", audio_chat(audio_part(wav(0.5, 440))));
    EXPECT_EQ(reply.status, 400) << reply.raw;
    EXPECT_EQ(reply.body["error"]["param"], "messages[1].content[1]") << reply.raw;
    EXPECT_NE(reply.body["error"]["message"].get<std::string>().find("no audio encoder"), std::string::npos) << reply.raw;
  }
}

}  // namespace
}  // namespace prefixd::testing
