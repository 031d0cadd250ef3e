// Image identity (digests, stand-in token ids) and image headers.
#include "engine/vision.h"

#include <xxhash.h>

#include <algorithm>
#include <format>

#include "util/hex.h"

namespace prefixd::engine {
namespace {

std::uint32_t be16(std::span<const std::uint8_t> b, size_t at) { return (std::uint32_t{b[at]} << 8) | b[at + 1]; }
std::uint32_t be32(std::span<const std::uint8_t> b, size_t at) { return (be16(b, at) << 16) | be16(b, at + 2); }
std::uint32_t le16(std::span<const std::uint8_t> b, size_t at) { return std::uint32_t{b[at]} | (std::uint32_t{b[at + 1]} << 8); }
std::uint32_t le32(std::span<const std::uint8_t> b, size_t at) { return le16(b, at) | (le16(b, at + 2) << 16); }

bool starts_with(std::span<const std::uint8_t> file, std::string_view magic) {
  return file.size() >= magic.size() && std::equal(magic.begin(), magic.end(), file.begin(),
                                                   [](char m, std::uint8_t b) { return static_cast<std::uint8_t>(m) == b; });
}

// A JPEG's size is in its first start-of-frame segment (SOF0..SOF15 but DHT, JPG and DAC).
ImageSize jpeg_size(std::span<const std::uint8_t> file) {
  size_t at = 2;
  while (at + 4 <= file.size()) {
    if (file[at] != 0xFF) throw ImageError("a malformed JPEG (no marker where a segment should start)");
    const std::uint8_t marker = file[at + 1];
    if (marker == 0xFF) {  // fill bytes
      at += 1;
      continue;
    }
    if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {  // no length
      at += 2;
      continue;
    }
    const std::uint32_t length = be16(file, at + 2);
    if (length < 2) throw ImageError("a malformed JPEG (a segment shorter than its header)");
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) {
      if (at + 9 > file.size() || length < 7) throw ImageError("a malformed JPEG (a truncated frame header)");
      return ImageSize{be16(file, at + 7), be16(file, at + 5)};
    }
    if (marker == 0xD9 || marker == 0xDA) break;  // end of image, start of scan: no frame before
    at += 2 + length;
  }
  throw ImageError("a malformed JPEG (no frame header)");
}

}  // namespace

std::string digest_hex(const ImageDigest& digest) { return util::to_hex(digest); }

std::string audio_format_of(std::span<const std::uint8_t> file) {
  if (file.size() < 12) return {};
  if (starts_with(file, "RIFF") && starts_with(file.subspan(8), "WAVE")) return "wav";
  if (starts_with(file, "fLaC")) return "flac";
  // An ID3 tag, or an MPEG audio frame's sync word (eleven set bits).
  if (starts_with(file, "ID3") || (file[0] == 0xFF && (file[1] & 0xE0) == 0xE0)) return "mp3";
  return {};
}

std::vector<Token> image_token_ids(const ImageDigest& digest, std::int32_t n_tokens) {
  std::vector<Token> ids(static_cast<size_t>(std::max(n_tokens, 0)));
  for (size_t i = 0; i < ids.size(); ++i) {
    const XXH64_hash_t h = XXH3_64bits_withSeed(digest.data(), digest.size(), i);
    // In [-2^30, -1]: never a vocabulary id.
    ids[i] = -1 - static_cast<Token>(h & 0x3FFFFFFF);
  }
  return ids;
}

ImageSize read_image_size(std::span<const std::uint8_t> file) {
  if (starts_with(file, "\x89PNG\r\n\x1a\n")) {
    if (file.size() < 24 || !std::equal(file.begin() + 12, file.begin() + 16, "IHDR")) {
      throw ImageError("a malformed PNG (no IHDR header)");
    }
    return ImageSize{be32(file, 16), be32(file, 20)};
  }
  if (starts_with(file, "\xFF\xD8")) return jpeg_size(file);
  if (starts_with(file, "GIF87a") || starts_with(file, "GIF89a")) {
    if (file.size() < 10) throw ImageError("a malformed GIF (a truncated header)");
    return ImageSize{le16(file, 6), le16(file, 8)};
  }
  if (starts_with(file, "BM")) {
    if (file.size() < 26) throw ImageError("a malformed BMP (a truncated header)");
    const auto height = static_cast<std::int32_t>(le32(file, 22));  // negative: stored top-down
    return ImageSize{le32(file, 18), static_cast<std::uint32_t>(height < 0 ? -static_cast<std::int64_t>(height) : height)};
  }
  if (starts_with(file, "RIFF") && file.size() >= 12 && std::equal(file.begin() + 8, file.begin() + 12, "WEBP")) {
    throw ImageError("WebP images are not supported; send PNG, JPEG, GIF or BMP");
  }
  throw ImageError("not an image in a supported format (PNG, JPEG, GIF, BMP)");
}

}  // namespace prefixd::engine
