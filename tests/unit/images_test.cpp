// Images as requests carry them and as the cache sees them: data URLs and base64, image headers
// read before decoding, the parser's image parts, the stand-in token ids, the spans a reuse may
// not end inside, and the embedding cache's budget.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "api/body/field_reader.h"
#include "api/images/image_input.h"
#include "api/openai/request_parser.h"
#include "api/responses/responses_api.h"
#include "cache/prefix_cache.h"
#include "engine/vision.h"
#include "scheduler/image_embeddings.h"

namespace prefixd {
namespace {

using nlohmann::json;

std::span<const std::uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

api::ApiError rejection_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const api::fields::Rejection& r) {
    return r.error;
  }
  ADD_FAILURE() << "no rejection";
  return {};
}

TEST(ImageInput, Base64DecodesWithOrWithoutPaddingAndRefusesAnythingElse) {
  EXPECT_EQ(api::decode_base64("aGVsbG8="), "hello");
  EXPECT_EQ(api::decode_base64("aGVsbG8"), "hello");
  EXPECT_EQ(api::decode_base64("aGVsbG8h"), "hello!");
  EXPECT_EQ(api::decode_base64(""), "");
  EXPECT_FALSE(api::decode_base64("aGVs bG8="));  // whitespace
  EXPECT_FALSE(api::decode_base64("aGVsbG8=="));  // padding that does not fit
  EXPECT_FALSE(api::decode_base64("a"));          // one character cannot be a byte
  EXPECT_FALSE(api::decode_base64("aGVsbG9="));   // leftover bits set: not the canonical encoding
  EXPECT_FALSE(api::decode_base64("aGVs-G8="));   // the URL-safe alphabet is not base64
}

TEST(ImageInput, Base64EncodesWithPaddingAndRoundTrips) {
  EXPECT_EQ(api::encode_base64("hello"), "aGVsbG8=");
  EXPECT_EQ(api::encode_base64("hello!"), "aGVsbG8h");
  EXPECT_EQ(api::encode_base64("hi"), "aGk=");
  EXPECT_EQ(api::encode_base64("h"), "aA==");
  EXPECT_EQ(api::encode_base64(""), "");
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  for (std::size_t n = 0; n <= every_byte.size(); n += 37) {
    const std::string bytes = every_byte.substr(0, n);
    EXPECT_EQ(api::decode_base64(api::encode_base64(bytes)), bytes) << n;
  }
}

TEST(ImageInput, ADataUrlGivesItsBytesAndEveryOtherUrlIsRefusedNamingTheField) {
  const api::ImageLimits limits{.max_images = 2, .max_bytes = 8};
  EXPECT_EQ(api::image_bytes_from_url("data:image/png;base64,aGVsbG8=", "p", limits), "hello");
  EXPECT_EQ(api::image_bytes_from_url("data:;base64,aGVsbG8=", "p", limits), "hello");  // no media type
  const struct {
    std::string url;
    std::string says;
  } refused[] = {
      {"https://example.com/a.png", "fetches nothing"},
      {"file:///etc/passwd", "must be a data URL"},
      {"data:image/png,hello", "base64-encoded"},
      {"data:image/png;base64", "without data"},
      {"data:text/html;base64,aGVsbG8=", "only images"},
      {"data:image/png;base64,aGVsbG8gd29ybGQ=", "larger than 8 bytes"},
      {"data:image/png;base64,", "empty"},
  };
  for (const auto& c : refused) {
    const api::ApiError error = rejection_of([&] { (void)api::image_bytes_from_url(c.url, "messages[0].content[1]", limits); });
    EXPECT_EQ(error.status, 400) << c.url;
    EXPECT_EQ(error.param, "messages[0].content[1]") << c.url;
    EXPECT_NE(error.message.find(c.says), std::string::npos) << c.url << ": " << error.message;
  }
}

TEST(ImageInput, ImageHeadersAreReadWithoutDecoding) {
  const std::string png = std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\x01\x40\0\0\0\xF0", 24);
  EXPECT_EQ(engine::read_image_size(bytes_of(png)).width, 320u);
  EXPECT_EQ(engine::read_image_size(bytes_of(png)).height, 240u);
  // JPEG: an APP0 segment, then the frame header (height 0x20, width 0x30).
  const std::string jpeg = std::string("\xFF\xD8\xFF\xE0\0\x04\0\0\xFF\xC0\0\x11\x08\0\x20\0\x30\x03", 18);
  EXPECT_EQ(engine::read_image_size(bytes_of(jpeg)).width, 0x30u);
  EXPECT_EQ(engine::read_image_size(bytes_of(jpeg)).height, 0x20u);
  const std::string gif = std::string("GIF89a\x10\0\x08\0", 10);
  EXPECT_EQ(engine::read_image_size(bytes_of(gif)).width, 16u);
  EXPECT_EQ(engine::read_image_size(bytes_of(gif)).height, 8u);
  std::string bmp = std::string("BM") + std::string(16, '\0');
  bmp += std::string("\x05\0\0\0", 4) + std::string("\xFD\xFF\xFF\xFF", 4);  // width 5, height -3 (top-down)
  EXPECT_EQ(engine::read_image_size(bytes_of(bmp)).width, 5u);
  EXPECT_EQ(engine::read_image_size(bytes_of(bmp)).height, 3u);

  const std::string refused[] = {std::string("RIFF\0\0\0\0WEBPVP8 ", 16), "plain text", std::string("\x89PNG\r\n\x1a\n", 8),
                                 std::string("\xFF\xD8\xFF\xD9", 4), std::string("\xFF\xD8\x12\x34\0\0", 6), "GIF89a"};
  for (const std::string& bytes : refused) {
    EXPECT_THROW((void)engine::read_image_size(bytes_of(bytes)), engine::ImageError) << bytes;
  }
}

TEST(ImageInput, TheParserPutsAMarkerWhereEachImageStandsAndKeepsItsBytes) {
  api::ParseOptions options;
  options.images = {.max_images = 2, .max_bytes = 64};
  const json body = {{"messages", json::array({{{"role", "user"},
                                                {"content", json::array({{{"type", "text"}, {"text", "Look:"}},
                                                                         {{"type", "image_url"},
                                                                          {"image_url", {{"url", "data:image/png;base64,aGk="}}}},
                                                                         {{"type", "text"}, {"text", "and"}},
                                                                         {{"type", "image_url"}, {"image_url", "data:image/gif;base64,eW8="}}})}}})}};
  const auto parsed = api::parse_chat_request(body.dump(), options);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  // As llama-server renders it: text parts joined by a newline, a marker with nothing beside it.
  EXPECT_EQ(parsed->chat.messages[0]["content"], "Look:<__media__>and<__media__>");
  ASSERT_EQ(parsed->images.size(), 2u);
  EXPECT_EQ(parsed->images[0].bytes, "hi");
  EXPECT_EQ(parsed->images[0].param, "messages[0].content[1]");
  EXPECT_EQ(parsed->images[1].bytes, "yo");

  options.images.max_images = 0;  // no projector
  const auto refused = api::parse_chat_request(body.dump(), options);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().param, "messages[0].content[1]");
  EXPECT_NE(refused.error().message.find("--mmproj"), std::string::npos);

  // Without images, the marker is ordinary text.
  options.images.max_images = 2;
  const json text_only = {{"messages", json::array({{{"role", "user"}, {"content", "what does <__media__> mean?"}}})}};
  EXPECT_TRUE(api::parse_chat_request(text_only.dump(), options).has_value());
}

TEST(ImageInput, TextPartsAreJoinedByANewlineAndMarkersStandNextToTheirNeighboursInEveryProtocol) {
  api::ParseOptions options;
  options.images = {.max_images = 4, .max_bytes = 64};
  const json image = {{"type", "image_url"}, {"image_url", "data:image/png;base64,aGk="}};
  const auto chat = [&](const json& parts) {
    const auto parsed = api::parse_chat_request(json{{"messages", json::array({{{"role", "user"}, {"content", parts}}})}}.dump(), options);
    EXPECT_TRUE(parsed.has_value());
    return parsed ? parsed->chat.messages[0]["content"].get<std::string>() : std::string();
  };
  const json a = {{"type", "text"}, {"text", "A."}};
  const json b = {{"type", "text"}, {"text", "B."}};
  EXPECT_EQ(chat(json::array({a, b})), "A.\nB.");
  EXPECT_EQ(chat(json::array({image, a})), "<__media__>A.");
  EXPECT_EQ(chat(json::array({image, image, a, b})), "<__media__><__media__>A.\nB.");

  const json input_image = {{"type", "input_image"}, {"image_url", "data:image/png;base64,aGk="}};
  const json responses = {{"input", json::array({{{"role", "user"},
                                                  {"content", json::array({{{"type", "input_text"}, {"text", "A."}}, input_image,
                                                                           {{"type", "input_text"}, {"text", "B."}},
                                                                           {{"type", "input_text"}, {"text", "C."}}})}}})}};
  const auto parsed = api::parse_responses_request(responses.dump(), options);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  EXPECT_EQ(parsed->chat.chat.messages[0]["content"], "A.<__media__>B.\nC.");
}

TEST(ImageTokens, StandInsAreNegativeAndAFunctionOfTheDigestAndPosition) {
  engine::ImageDigest a{};
  engine::ImageDigest b{};
  b[15] = 1;
  const auto ids = engine::image_token_ids(a, 64);
  ASSERT_EQ(ids.size(), 64u);
  for (const engine::Token t : ids) EXPECT_LT(t, 0);
  EXPECT_EQ(ids, engine::image_token_ids(a, 64));
  const auto other = engine::image_token_ids(b, 64);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_NE(ids[i], other[i]) << i;
  EXPECT_EQ(std::set<engine::Token>(ids.begin(), ids.end()).size(), ids.size());
}

TEST(UnbrokenSpans, AReuseLengthInsideASpanFallsBackToItsStart) {
  const std::vector<cache::UnbrokenSpan> spans = {{10, 26}, {40, 56}};
  EXPECT_EQ(cache::outside_unbroken(spans, 5), 5);
  EXPECT_EQ(cache::outside_unbroken(spans, 10), 10);  // before the span: fine
  EXPECT_EQ(cache::outside_unbroken(spans, 11), 10);
  EXPECT_EQ(cache::outside_unbroken(spans, 25), 10);
  EXPECT_EQ(cache::outside_unbroken(spans, 26), 26);  // right after it: fine
  EXPECT_EQ(cache::outside_unbroken(spans, 41), 40);
  EXPECT_EQ(cache::outside_unbroken(spans, 100), 100);
  EXPECT_EQ(cache::outside_unbroken({}, 7), 7);
}

// A projector that counts its encodes and returns rows derived from the digest.
class CountingVision final : public engine::Vision {
 public:
  const engine::VisionInfo& info() const override { return info_; }
  std::shared_ptr<const engine::PreparedImage> prepare(std::span<const std::uint8_t>) const override { return nullptr; }
  std::vector<float> encode(const engine::PreparedImage& image) override {
    ++encodes;
    return std::vector<float>(static_cast<size_t>(image.n_tokens) * 4, static_cast<float>(image.digest[0]));
  }
  int encodes = 0;

 private:
  engine::VisionInfo info_{.n_embd = 4};
};

engine::PreparedImage image(std::uint8_t id) {
  engine::PreparedImage out;
  out.digest[0] = id;
  out.n_tokens = 16;  // 16 rows of 4 floats: 256 bytes
  return out;
}

TEST(ImageEmbeddings, KeptByDigestWithinTheBudgetLeastRecentlyUsedFirstOut) {
  CountingVision vision;
  scheduler::ImageEmbeddings kept(600);  // two images' rows
  EXPECT_FALSE(kept.get(vision, image(1)).reused);
  EXPECT_FALSE(kept.get(vision, image(2)).reused);
  const auto again = kept.get(vision, image(1));
  EXPECT_TRUE(again.reused);
  EXPECT_EQ((*again.rows)[0], 1.0f);
  EXPECT_EQ(vision.encodes, 2);
  EXPECT_FALSE(kept.get(vision, image(3)).reused);  // evicts 2, the least recently used
  EXPECT_EQ(kept.count(), 2);
  EXPECT_EQ(kept.bytes(), 512u);
  EXPECT_TRUE(kept.get(vision, image(1)).reused);
  EXPECT_FALSE(kept.get(vision, image(2)).reused);
  EXPECT_EQ(vision.encodes, 4);

  scheduler::ImageEmbeddings none(100);  // smaller than one image: encoded every time, nothing kept
  EXPECT_FALSE(none.get(vision, image(1)).reused);
  EXPECT_FALSE(none.get(vision, image(1)).reused);
  EXPECT_EQ(none.count(), 0);
}

}  // namespace
}  // namespace prefixd
