// The Vision implementation over libmtmd. Internal to src/engine/.
#pragma once

#include <memory>
#include <string>

#include <llama.h>

#include "engine/vision.h"

namespace prefixd::engine::detail {

struct VisionOptions {
  int n_threads = 1;
  bool use_gpu = false;
  bool flash_attention = true;
  std::int32_t n_batch = 512;         // media whose tokens attend both ways must fit in one decode
  std::uint64_t max_pixels = 0;       // 0: kDefaultMaxImagePixels
  double max_audio_seconds = 0;       // 0: kDefaultMaxAudioSeconds
};

inline constexpr std::uint64_t kDefaultMaxImagePixels = 32ull << 20;  // about 33 megapixels
inline constexpr double kDefaultMaxAudioSeconds = 600;

// Loads the projector (a vision encoder, an audio encoder or both) at `path` for `model`. Throws
// std::runtime_error with the reason when the file is not a projector libmtmd loads, does not
// match the model, or places tokens in a way the prompt cache cannot follow (M-RoPE positions,
// which do not advance one per token).
std::unique_ptr<Vision> load_mtmd_vision(const std::string& path, const llama_model* model, const VisionOptions& options);

}  // namespace prefixd::engine::detail
