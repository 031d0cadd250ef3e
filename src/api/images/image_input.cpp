#include "api/images/image_input.h"

#include <array>
#include <format>

#include "api/body/field_reader.h"
#include "engine/vision.h"

namespace prefixd::api {
namespace {

constexpr std::array<std::int8_t, 256> make_base64_table() {
  std::array<std::int8_t, 256> table{};
  table.fill(-1);
  constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (std::size_t i = 0; i < alphabet.size(); ++i) table[static_cast<unsigned char>(alphabet[i])] = static_cast<std::int8_t>(i);
  return table;
}
constexpr std::array<std::int8_t, 256> kBase64 = make_base64_table();

// Decoded size of `n` base64 characters without padding: 3 bytes per 4 characters.
std::size_t decoded_size(std::size_t n) { return n / 4 * 3 + (n % 4 == 0 ? 0 : n % 4 - 1); }

}  // namespace

std::string encode_base64(std::string_view bytes) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  const auto byte = [&](std::size_t i) { return i < bytes.size() ? std::uint32_t{static_cast<std::uint8_t>(bytes[i])} : 0u; };
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::uint32_t n = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? kAlphabet[n & 63] : '=');
  }
  return out;
}

std::optional<std::string> decode_base64(std::string_view text) {
  if (text.size() % 4 == 0 && !text.empty()) {
    if (text.ends_with("==")) {
      text.remove_suffix(2);
    } else if (text.ends_with('=')) {
      text.remove_suffix(1);
    }
  }
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(decoded_size(text.size()));
  std::uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    const std::int8_t value = kBase64[static_cast<unsigned char>(c)];
    if (value < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(value);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  // Leftover bits of the last character must be zero (canonical encoding).
  if ((bits & ((1u << count) - 1)) != 0) return std::nullopt;
  return out;
}

std::string image_bytes_from_base64(std::string_view data, const std::string& param, const ImageLimits& limits) {
  // Checked before decoding: an oversized image costs no allocation.
  if (decoded_size(data.size()) > limits.max_bytes + 2) {
    fields::reject(param, std::format("the image in '{}' is larger than {} bytes (--max-image-bytes)", param, limits.max_bytes));
  }
  std::optional<std::string> bytes = decode_base64(data);
  if (!bytes) fields::reject(param, std::format("the image data in '{}' is not valid base64", param));
  if (bytes->size() > limits.max_bytes) {
    fields::reject(param, std::format("the image in '{}' is larger than {} bytes (--max-image-bytes)", param, limits.max_bytes));
  }
  if (bytes->empty()) fields::reject(param, std::format("the image in '{}' is empty", param));
  return std::move(*bytes);
}

std::string image_bytes_from_url(std::string_view url, const std::string& param, const ImageLimits& limits) {
  if (url.starts_with("http://") || url.starts_with("https://")) {
    fields::reject(param, std::format("'{}' is a remote URL; this server fetches nothing: send the image inline as a "
                                      "data URL (data:image/png;base64,...)",
                                      param));
  }
  if (!url.starts_with("data:")) {
    fields::reject(param, std::format("'{}' must be a data URL (data:image/png;base64,...)", param));
  }
  const std::size_t comma = url.find(',');
  if (comma == std::string_view::npos) fields::reject(param, std::format("'{}' is a data URL without data", param));
  const std::string_view header = url.substr(5, comma - 5);
  if (!header.ends_with(";base64")) {
    fields::reject(param, std::format("'{}' must be base64-encoded (data:image/...;base64,...)", param));
  }
  const std::string_view media_type = header.substr(0, header.size() - 7);
  if (!media_type.empty() && !media_type.starts_with("image/")) {
    fields::reject(param, std::format("'{}' has media type '{}'; only images (image/...) are read", param, media_type));
  }
  return image_bytes_from_base64(url.substr(comma + 1), param, limits);
}

// With images, the markers in the messages' text must be exactly the images': client text that
// spells the marker would move every image after it.
void check_image_markers(const nlohmann::ordered_json& messages, std::size_t images, const std::string& param) {
  std::size_t found = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto content = messages[i].find("content");
    if (content == messages[i].end() || !content->is_string()) continue;
    const std::string& text = content->get_ref<const std::string&>();
    for (std::size_t at = text.find(kImageMarker); at != std::string::npos; at = text.find(kImageMarker, at + 1)) ++found;
  }
  if (found != images) {
    fields::reject(param, std::format("the text of '{}' contains '{}', which stands for an image in this server's "
                                      "prompts; remove it from a request that carries images",
                                      param, kImageMarker));
  }
}

void require_projector(const std::string& param, const ImageLimits& limits) {
  if (limits.max_images == 0) {
    fields::reject(param, std::format("'{}' is an image and this server has no vision projector (start it with --mmproj)",
                                      param));
  }
  if (!limits.images) {
    fields::reject(param, std::format("'{}' is an image and this server's projector has no vision encoder (it takes "
                                      "audio only)",
                                      param));
  }
}

std::string audio_bytes(std::string_view data, std::string_view format, const std::string& param,
                        const ImageLimits& limits) {
  if (limits.max_images == 0 || !limits.audio) {
    fields::reject(param, std::format("'{}' is audio and this server has no audio encoder (start it with --mmproj and "
                                      "an audio projector)",
                                      param));
  }
  if (format != "wav" && format != "mp3" && format != "flac") {
    fields::reject(param + ".input_audio.format",
                   std::format("'{}.input_audio.format' must be \"wav\", \"mp3\" or \"flac\"", param));
  }
  std::string bytes = image_bytes_from_base64(data, param + ".input_audio.data", limits);
  const auto* first = reinterpret_cast<const std::uint8_t*>(bytes.data());
  if (engine::audio_format_of(std::span<const std::uint8_t>(first, bytes.size())) != format) {
    fields::reject(param + ".input_audio.data",
                   std::format("'{}.input_audio.data' is not a {} file", param, format));
  }
  return bytes;
}

void add_audio(std::vector<ImageInput>& images, std::string bytes, std::string param, const ImageLimits& limits) {
  if (images.size() >= limits.max_images) {
    fields::reject(param, std::format("a request may carry at most {} images and audio clips (--max-images)",
                                      limits.max_images));
  }
  images.push_back(ImageInput{std::move(bytes), std::move(param), true});
}

void add_audio_part(const nlohmann::ordered_json& part, const std::string& part_param, std::vector<ImageInput>& images,
                    const ImageLimits& limits) {
  const auto audio = part.find("input_audio");
  const std::string audio_param = part_param + ".input_audio";
  if (audio == part.end() || !audio->is_object()) {
    fields::reject(audio_param, std::format("'{}' must be an object with 'data' and 'format'", audio_param));
  }
  const auto data = audio->find("data");
  if (data == audio->end() || !data->is_string()) {
    fields::reject(audio_param + ".data", std::format("'{}.data' must be a string (base64 of the audio file)", audio_param));
  }
  const auto format = audio->find("format");
  if (format == audio->end() || !format->is_string()) {
    fields::reject(audio_param + ".format",
                   std::format("'{}.format' must be a string (\"wav\", \"mp3\" or \"flac\")", audio_param));
  }
  std::string bytes = audio_bytes(data->get_ref<const std::string&>(), format->get_ref<const std::string&>(), part_param, limits);
  add_audio(images, std::move(bytes), part_param, limits);
}

void add_image(std::vector<ImageInput>& images, std::string bytes, std::string param, const ImageLimits& limits) {
  require_projector(param, limits);
  if (images.size() >= limits.max_images) {
    fields::reject(param, std::format("a request may carry at most {} images (--max-images)", limits.max_images));
  }
  images.push_back(ImageInput{std::move(bytes), std::move(param)});
}

}  // namespace prefixd::api
