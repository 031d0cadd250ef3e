// prefixd engine — images: a vision projector (libmtmd's, loaded with --mmproj) that turns an image
// file into the model's image tokens and their embeddings.
//
// An image enters a prompt as the text tokens the model writes around it (`before`, `after`) and
// `n_tokens` positions that the projector's embeddings fill. Those positions hold stand-in token
// ids derived from the image's digest (image_token_ids), so the prompt cache, which matches tokens,
// tells images apart by their pixels and never shares K/V past an image with a prompt that holds
// another. The stand-ins are negative: no vocabulary has them, and the engine never decodes them
// as tokens.
// Must not know: HTTP, requests, the prompt cache.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/types.h"

namespace prefixd::engine {

// An image the projector cannot read (not an image, a format it does not decode, too large).
class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// XXH3-128 of the decoded image: its width and height (two little-endian u32) followed by its RGB
// bytes, row by row. The same picture in another file format has the same digest.
using ImageDigest = std::array<std::uint8_t, 16>;
std::string digest_hex(const ImageDigest& digest);

// The stand-in token ids of an image's positions: negative, a pure function of its digest and the
// position within the image.
std::vector<Token> image_token_ids(const ImageDigest& digest, std::int32_t n_tokens);
inline bool is_image_token(Token token) { return token < 0; }

// One image (or audio clip) decoded and cut into the model's tokens. Immutable; shared by the
// requests that hold it. What the projector needs to encode it later is kept by the implementation.
// An audio clip is media like an image: its positions hold stand-ins of the digest of its decoded
// samples, filled with the audio encoder's embeddings, one position per token (libmtmd cuts it
// into 30-second windows; their tokens follow each other with nothing between).
class PreparedImage {
 public:
  virtual ~PreparedImage() = default;
  ImageDigest digest{};
  std::int32_t width = 0;   // audio: samples at the projector's sample rate
  std::int32_t height = 0;  // audio: 1
  bool audio = false;
  std::vector<Token> before;  // text tokens that open the image (e.g. Gemma 3's <start_of_image>)
  std::int32_t n_tokens = 0;  // positions its embeddings fill
  std::vector<Token> after;   // text tokens that close it
  // Its positions attend to each other both ways (Gemma 3): decoded together with causal
  // attention off, so they can only be computed whole.
  bool non_causal = false;
  // M-RoPE models (mtmd_decode_use_mrope): an image's tokens all take the temporal position of its
  // first one, each with its own row and column, and the text after it comes n_pos positions
  // later (max(rows, columns)); `grid` holds each token's (row, column) offsets in token order.
  // Empty for audio, whose tokens take one position each on every model, and without M-RoPE
  // (n_pos == n_tokens).
  std::int32_t n_pos = 0;
  struct GridPlace {
    std::int32_t row = 0;
    std::int32_t column = 0;
  };
  std::vector<GridPlace> grid;
};

// The width and height an image file declares in its header (PNG, JPEG, GIF, BMP), read without
// decoding it, so that an oversized image is refused before it costs memory. Throws ImageError for
// another format or a malformed header.
struct ImageSize {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
};
ImageSize read_image_size(std::span<const std::uint8_t> file);

struct VisionInfo {
  std::string path;            // the projector file
  std::string projector;       // its projector type (clip.projector_type)
  std::int32_t n_embd = 0;     // width of one embedding row: the text model's input width
  std::uint64_t max_pixels = 0;  // larger images are refused (width × height)
  bool images = true;          // it has a vision encoder
  bool audio = false;          // it has an audio encoder
  std::int32_t sample_rate = 0;       // audio: the samples per second it encodes
  double max_audio_seconds = 0;       // longer audio is refused
};

// The container an audio file's first bytes name ("wav", "mp3", "flac"), as libmtmd's decoder
// recognises them; empty for anything else.
std::string audio_format_of(std::span<const std::uint8_t> file);

class Vision {
 public:
  virtual ~Vision() = default;
  virtual const VisionInfo& info() const = 0;
  // Decodes an image file (PNG, JPEG, GIF, BMP, ... what the projector's loader reads) or an
  // audio file (audio_format_of: WAV, MP3, FLAC, resampled to the encoder's rate) and cuts it into
  // tokens. Thread-safe. Throws ImageError with the reason for bytes it cannot read or use.
  virtual std::shared_ptr<const PreparedImage> prepare(std::span<const std::uint8_t> file) const = 0;
  // The image's embeddings: n_tokens rows of info().n_embd floats. Costly (the vision encoder);
  // called on the engine's thread. Throws ImageError when the encoder fails.
  virtual std::vector<float> encode(const PreparedImage& image) = 0;
};

}  // namespace prefixd::engine
