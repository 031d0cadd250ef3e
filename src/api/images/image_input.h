// prefixd api — images in requests: where they stand in a message and the bytes of each.
//
// Every protocol's parser replaces an image part with kImageMarker in the message text it hands
// the chat template (as text parts are joined) and keeps the image's bytes, in order, with the
// field that sent it. The prompt builder finds the markers in the rendered prompt and puts each
// image's tokens there (prompt_builder.h). Images come inline only (base64, a data: URL in OpenAI's
// form); the server fetches nothing.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefixd::api {

// What an image part becomes in the text the template renders. Client text that contains it is
// refused when the request carries images (the markers would not match the images).
inline constexpr std::string_view kImageMarker = "<__media__>";

struct ImageLimits {
  std::size_t max_images = 0;           // images and audio clips per request; 0: no projector, all refused
  std::size_t max_bytes = 20u << 20;    // one image or audio file, decoded from base64
  bool images = true;                   // the projector has a vision encoder
  bool audio = false;                   // the projector has an audio encoder
};

struct ImageInput {
  std::string bytes;  // the image file as sent (PNG, JPEG, ...), or an audio file (WAV, MP3, FLAC)
  std::string param;  // the field that carried it, for errors: "messages[1].content[0]"
  bool audio = false;
};

// The bytes of standard base64 (padding optional, no whitespace or other characters), or nullopt.
std::optional<std::string> decode_base64(std::string_view text);
// Standard base64 with padding: decode_base64's inverse, for the clients that send images (the
// test suite, the fuzz seeds).
std::string encode_base64(std::string_view bytes);

// Reads an image URL: "data:<media type>;base64,<data>" gives its decoded bytes. Throws the
// parser's rejection (fields::Rejection) naming `param`: for a remote URL (not fetched), another
// scheme, a data URL that is not base64 or not an image type, and an image over the byte limit.
std::string image_bytes_from_url(std::string_view url, const std::string& param, const ImageLimits& limits);

// Checks an inline image's base64 payload against the limits and decodes it; throws as above.
std::string image_bytes_from_base64(std::string_view data, const std::string& param, const ImageLimits& limits);

// Refuses (naming `param`) an image part on a server without a vision projector, before anything
// else about it is read.
void require_projector(const std::string& param, const ImageLimits& limits);

// Appends an image to `images`, refusing it past the per-request limit (or on a server without a
// projector); throws as above.
void add_image(std::vector<ImageInput>& images, std::string bytes, std::string param, const ImageLimits& limits);

// An audio part's bytes: `data` is base64 of a file in `format` ("wav", "mp3" or "flac", checked
// against the file's own first bytes). Refuses (naming `param`'s fields) on a server whose
// projector has no audio encoder, an unknown format, bad base64, a file over the byte limit, or
// bytes that are not the format named; throws as above.
std::string audio_bytes(std::string_view data, std::string_view format, const std::string& param,
                        const ImageLimits& limits);

// Appends an audio clip to `images` (media in prompt order), under the same per-request limit.
void add_audio(std::vector<ImageInput>& images, std::string bytes, std::string param, const ImageLimits& limits);

// Reads an OpenAI audio part (chat's and the Responses API's shape alike: {"type": "input_audio",
// "input_audio": {"data": "<base64>", "format": "wav"}}) at `part_param` and appends its clip;
// throws as above, naming the part's fields.
void add_audio_part(const nlohmann::ordered_json& part, const std::string& part_param, std::vector<ImageInput>& images,
                    const ImageLimits& limits);

// Checks that the messages' text (chat template input, string contents) holds exactly `images`
// markers; throws the parser's rejection (naming `param`, the field the messages came from) when
// client text spells the marker.
void check_image_markers(const nlohmann::ordered_json& messages, std::size_t images, const std::string& param = "messages");

}  // namespace prefixd::api
