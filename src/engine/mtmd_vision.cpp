// Images and audio through libmtmd: the projector's own preprocessing and tokenization (what text
// goes around an image or a clip, how many positions it takes) and its encoders.
#include "engine/mtmd_vision.h"

#include <cstring>
#include <format>
#include <mutex>
#include <stdexcept>

#include <gguf.h>
#include <mtmd-helper.h>
#include <mtmd.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

namespace prefixd::engine::detail {
namespace {

struct MtmdDeleter {
  void operator()(mtmd_context* ctx) const { mtmd_free(ctx); }
  void operator()(mtmd_bitmap* bitmap) const { mtmd_bitmap_free(bitmap); }
  void operator()(mtmd_input_chunks* chunks) const { mtmd_input_chunks_free(chunks); }
  void operator()(mtmd_input_chunk* chunk) const { mtmd_input_chunk_free(chunk); }
};
using MtmdContextPtr = std::unique_ptr<mtmd_context, MtmdDeleter>;
using BitmapPtr = std::unique_ptr<mtmd_bitmap, MtmdDeleter>;
using ChunksPtr = std::unique_ptr<mtmd_input_chunks, MtmdDeleter>;
using ChunkPtr = std::unique_ptr<mtmd_input_chunk, MtmdDeleter>;

void route_mtmd_log(ggml_log_level level, const char* text, void* /*user_data*/) {
  std::string_view line(text);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.empty()) return;
  switch (level) {
    case GGML_LOG_LEVEL_ERROR: spdlog::error("mtmd: {}", line); break;
    case GGML_LOG_LEVEL_WARN: spdlog::warn("mtmd: {}", line); break;
    default: spdlog::trace("mtmd: {}", line); break;
  }
}

// The projector type the file names (clip.projector_type), for the log and /v1/models; empty when
// it names none.
std::string projector_type(const std::string& path) {
  gguf_init_params params{};
  params.no_alloc = true;
  params.ctx = nullptr;
  const std::unique_ptr<gguf_context, decltype(&gguf_free)> gguf(gguf_init_from_file(path.c_str(), params), &gguf_free);
  if (!gguf) return {};
  const int64_t key = gguf_find_key(gguf.get(), "clip.projector_type");
  if (key < 0 || gguf_get_kv_type(gguf.get(), key) != GGUF_TYPE_STRING) return {};
  return gguf_get_val_str(gguf.get(), key);
}

class MtmdImage final : public PreparedImage {
 public:
  std::vector<ChunkPtr> chunks;  // the image's chunk, or an audio clip's windows, as mtmd_encode_chunk takes them
};

ImageDigest digest_of(const mtmd_bitmap* bitmap) {
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) throw std::bad_alloc();
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> owned(state, &XXH3_freeState);
  XXH3_128bits_reset(state);
  const std::uint32_t size[2] = {mtmd_bitmap_get_nx(bitmap), mtmd_bitmap_get_ny(bitmap)};
  std::uint8_t header[8];
  for (int i = 0; i < 2; ++i) {
    for (int b = 0; b < 4; ++b) header[i * 4 + b] = static_cast<std::uint8_t>(size[i] >> (8 * b));
  }
  XXH3_128bits_update(state, header, sizeof(header));
  XXH3_128bits_update(state, mtmd_bitmap_get_data(bitmap), mtmd_bitmap_get_n_bytes(bitmap));
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state));
  ImageDigest digest;
  std::memcpy(digest.data(), canonical.digest, digest.size());
  return digest;
}

class MtmdVision final : public Vision {
 public:
  MtmdVision(MtmdContextPtr ctx, VisionInfo info, std::int32_t n_batch)
      : ctx_(std::move(ctx)), info_(std::move(info)), n_batch_(n_batch), mrope_(mtmd_decode_use_mrope(ctx_.get())) {}

  const VisionInfo& info() const override { return info_; }

  std::shared_ptr<const PreparedImage> prepare(std::span<const std::uint8_t> file) const override {
    if (!audio_format_of(file).empty()) return prepare_audio(file);
    if (!info_.images) throw ImageError("the model's projector has no vision encoder: it takes audio only");
    const ImageSize size = read_image_size(file);
    if (size.width == 0 || size.height == 0) throw ImageError("the image has no pixels");
    if (static_cast<std::uint64_t>(size.width) * size.height > info_.max_pixels) {
      throw ImageError(std::format("the image is {}x{} pixels, more than the {} this server decodes (--max-image-pixels)",
                                   size.width, size.height, info_.max_pixels));
    }
    BitmapPtr bitmap = decode(file, "the image decoder cannot read it (a damaged or unsupported file)");
    if (mtmd_bitmap_is_audio(bitmap.get())) throw ImageError("it is audio, not an image");
    auto image = std::make_shared<MtmdImage>();
    image->digest = digest_of(bitmap.get());
    image->width = static_cast<std::int32_t>(mtmd_bitmap_get_nx(bitmap.get()));
    image->height = static_cast<std::int32_t>(mtmd_bitmap_get_ny(bitmap.get()));
    cut(*image, bitmap.get(), MTMD_INPUT_CHUNK_TYPE_IMAGE);
    return image;
  }

  std::vector<float> encode(const PreparedImage& image) override {
    const auto& media = dynamic_cast<const MtmdImage&>(image);
    const char* encoder = media.audio ? "the audio encoder" : "the vision encoder";
    std::vector<float> out;
    out.reserve(static_cast<size_t>(image.n_tokens) * static_cast<size_t>(info_.n_embd));
    for (const ChunkPtr& chunk : media.chunks) {
      if (mtmd_encode_chunk(ctx_.get(), chunk.get()) != 0) throw ImageError(std::string(encoder) + " failed");
      const float* embd = mtmd_get_output_embd(ctx_.get());
      if (embd == nullptr) throw ImageError(std::string(encoder) + " returned nothing");
      const size_t n = mtmd_input_chunk_get_n_tokens(chunk.get()) * static_cast<size_t>(info_.n_embd);
      out.insert(out.end(), embd, embd + n);
    }
    return out;
  }

 private:
  // An audio file (WAV, MP3, FLAC), decoded to mono samples at the encoder's rate.
  std::shared_ptr<const PreparedImage> prepare_audio(std::span<const std::uint8_t> file) const {
    if (!info_.audio) throw ImageError("the model's projector has no audio encoder");
    BitmapPtr bitmap = decode(file, "the audio decoder cannot read it (a damaged or unsupported " + audio_format_of(file) + " file)");
    if (!mtmd_bitmap_is_audio(bitmap.get())) throw ImageError("it is not audio");
    const std::uint32_t samples = mtmd_bitmap_get_nx(bitmap.get());
    if (samples == 0) throw ImageError("the audio has no samples");
    const double seconds = static_cast<double>(samples) / info_.sample_rate;
    if (seconds > info_.max_audio_seconds) {
      throw ImageError(std::format("the audio lasts {:.1f} s, more than the {:.0f} s this server takes (--max-audio-seconds)",
                                   seconds, info_.max_audio_seconds));
    }
    auto clip = std::make_shared<MtmdImage>();
    clip->audio = true;
    clip->digest = digest_of(bitmap.get());  // of the decoded samples: the same sound in another container matches
    clip->width = static_cast<std::int32_t>(samples);
    clip->height = 1;
    cut(*clip, bitmap.get(), MTMD_INPUT_CHUNK_TYPE_AUDIO);
    return clip;
  }

  BitmapPtr decode(std::span<const std::uint8_t> file, const std::string& unreadable) const {
    const mtmd_helper_bitmap_wrapper wrapper =
        mtmd_helper_bitmap_init_from_buf(ctx_.get(), file.data(), file.size(), false, mtmd_helper_init_opt_default());
    BitmapPtr bitmap(wrapper.bitmap);
    if (wrapper.video_ctx != nullptr) mtmd_helper_video_free(wrapper.video_ctx);
    if (!bitmap) throw ImageError(unreadable);
    return bitmap;
  }

  // The projector decides the text around the media and its positions: its marker tokenized alone
  // gives the text before, the media's chunks (one image; an audio clip's windows, back to back),
  // and the text after.
  void cut(MtmdImage& media, const mtmd_bitmap* bitmap, mtmd_input_chunk_type kind) const {
    const char* what = kind == MTMD_INPUT_CHUNK_TYPE_AUDIO ? "audio" : "image";
    ChunksPtr chunks(mtmd_input_chunks_init());
    const char* marker = mtmd_default_marker();
    const mtmd_input_text text{marker, std::strlen(marker), /*add_special=*/false, /*parse_special=*/true};
    const mtmd_bitmap* bitmaps[] = {bitmap};
    if (const int32_t rc = mtmd_tokenize(ctx_.get(), chunks.get(), &text, bitmaps, 1); rc != 0) {
      throw ImageError(rc == 2 ? "the projector could not preprocess it" : "the projector could not place it");
    }
    bool seen_media = false;
    bool after = false;
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks.get()); ++i) {
      const mtmd_input_chunk* chunk = mtmd_input_chunks_get(chunks.get(), i);
      if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
        size_t n = 0;
        const llama_token* tokens = mtmd_input_chunk_get_tokens_text(chunk, &n);
        auto& side = seen_media ? media.after : media.before;
        side.insert(side.end(), tokens, tokens + n);
        after = seen_media;
        continue;
      }
      // One image chunk; an audio clip's windows follow each other with no text between.
      if (mtmd_input_chunk_get_type(chunk) != kind || after ||
          (seen_media && kind == MTMD_INPUT_CHUNK_TYPE_IMAGE)) {
        throw ImageError(std::format("the projector turned it into something other than one {}", what));
      }
      seen_media = true;
      const auto n_tokens = static_cast<std::int32_t>(mtmd_input_chunk_get_n_tokens(chunk));
      const auto n_pos = static_cast<std::int32_t>(mtmd_input_chunk_get_n_pos(chunk));
      if (kind == MTMD_INPUT_CHUNK_TYPE_IMAGE && mrope_) {
        place_on_grid(media, chunk, n_tokens);
      } else if (n_pos != n_tokens) {
        throw ImageError("the projector places its tokens at fewer positions than it has tokens");
      }
      media.n_tokens += n_tokens;
      media.n_pos += n_pos;
      media.non_causal = mtmd_decode_use_non_causal(ctx_.get(), chunk);
      media.chunks.emplace_back(mtmd_input_chunk_copy(chunk));
    }
    if (!seen_media || media.n_tokens <= 0) throw ImageError(std::format("the projector produced no {} tokens for it", what));
    // Positions that attend to each other both ways are decoded in one batch; causal ones in as
    // many as they take.
    if (media.non_causal && media.n_tokens > n_batch_) {
      throw ImageError(std::format("it takes {} positions, more than one batch of {} (--batch-size)", media.n_tokens,
                                   n_batch_));
    }
  }

  // M-RoPE: every token of the image at the temporal position of its first, at its row and column.
  static void place_on_grid(MtmdImage& image, const mtmd_input_chunk* chunk, std::int32_t n_tokens) {
    const mtmd_image_tokens* tokens = mtmd_input_chunk_get_tokens_image(chunk);
    if (tokens == nullptr) throw ImageError("the projector gave no image grid");
    image.grid.reserve(static_cast<size_t>(n_tokens));
    for (std::int32_t i = 0; i < n_tokens; ++i) {
      const mtmd_decoder_pos place = mtmd_image_tokens_get_decoder_pos(tokens, 0, static_cast<size_t>(i));
      if (place.t != 0) throw ImageError("the projector spreads the image over several temporal positions (video)");
      image.grid.push_back({static_cast<std::int32_t>(place.y), static_cast<std::int32_t>(place.x)});
    }
  }

  MtmdContextPtr ctx_;
  VisionInfo info_;
  std::int32_t n_batch_;
  bool mrope_ = false;  // the text model takes M-RoPE positions (mtmd_decode_use_mrope)
};

}  // namespace

std::unique_ptr<Vision> load_mtmd_vision(const std::string& path, const llama_model* model, const VisionOptions& options) {
  static std::once_flag log_once;
  std::call_once(log_once, [] { mtmd_helper_log_set(route_mtmd_log, nullptr); });
  mtmd_context_params params = mtmd_context_params_default();
  params.use_gpu = options.use_gpu;
  params.print_timings = false;
  params.n_threads = options.n_threads;
  params.flash_attn_type = options.flash_attention ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  params.warmup = false;
  MtmdContextPtr ctx(mtmd_init_from_file(path.c_str(), model, params));
  if (!ctx) throw std::runtime_error("cannot load the vision projector '" + path + "' (see the log above)");
  if (!mtmd_support_vision(ctx.get()) && !mtmd_support_audio(ctx.get())) {
    throw std::runtime_error("'" + path + "' is neither a vision nor an audio projector");
  }
  VisionInfo info;
  info.path = path;
  info.n_embd = llama_model_n_embd_inp(model);
  info.max_pixels = options.max_pixels > 0 ? options.max_pixels : kDefaultMaxImagePixels;
  info.projector = projector_type(path);
  info.images = mtmd_support_vision(ctx.get());
  info.audio = mtmd_support_audio(ctx.get());
  info.sample_rate = info.audio ? mtmd_get_audio_sample_rate(ctx.get()) : 0;
  info.max_audio_seconds = options.max_audio_seconds > 0 ? options.max_audio_seconds : kDefaultMaxAudioSeconds;
  if (info.audio && info.sample_rate <= 0) throw std::runtime_error("'" + path + "' names no audio sample rate");
  // The projector follows the model: on a GPU device when layers were offloaded there.
  std::string takes;
  if (info.images) takes = std::format("images of at most {:.1f} megapixels", static_cast<double>(info.max_pixels) / 1e6);
  if (info.audio) {
    takes += std::format("{}audio of at most {:.0f} s at {} Hz", takes.empty() ? "" : " and ", info.max_audio_seconds,
                         info.sample_rate);
  }
  const char* encoders = !info.audio ? "the image encoder" : info.images ? "the image and audio encoders" : "the audio encoder";
  spdlog::info("projector {} ({}) loaded: {}, {} on the {}{}", path, info.projector.empty() ? "type not named" : info.projector,
               takes, encoders, options.use_gpu ? "GPU" : "CPU",
               mtmd_decode_use_mrope(ctx.get()) ? "; the model takes M-RoPE positions: an image's tokens share one, and "
                                                  "the text after it resumes by the image grid's longer side"
                                                : "");
  return std::make_unique<MtmdVision>(std::move(ctx), std::move(info), options.n_batch);
}

}  // namespace prefixd::engine::detail
