// Projector presets: GGUF files in the layout libmtmd loads ("clip" files, as llama.cpp's converter
// writes them with --mmproj), with random weights. Shapes follow the vision towers and audio
// encoders they are named after; the projection's output width is the paired text model's n_embd.
#include <cmath>
#include <format>
#include <string_view>

#include "modelgen/spec.h"

namespace prefixd::modelgen {
namespace {

TensorSpec matrix(std::string name, std::int64_t in, std::int64_t out) {
  return {std::move(name), {in, out}, Normal{1.0f / std::sqrt(static_cast<float>(in))}, StorageClass::matrix};
}
// The loader adds or transposes these in f32/f16 graph ops that take no quantized type.
TensorSpec f32_matrix(std::string name, std::vector<std::int64_t> ne, float stddev) {
  return {std::move(name), std::move(ne), Normal{stddev}, StorageClass::f32};
}
TensorSpec ones(std::string name, std::int64_t n) { return {std::move(name), {n}, Constant{1.0f}, StorageClass::f32}; }
TensorSpec small(std::string name, std::int64_t n) { return {std::move(name), {n}, Normal{0.02f}, StorageClass::f32}; }
std::string vblk(int layer, std::string_view what) { return std::format("v.blk.{}.{}", layer, what); }

// Q, K and V as three matrices (SigLIP, Qwen2-VL) or one of three times the width (Qwen3-VL).
enum class QkvLayout { separate, fused };

// One pre-norm transformer block of a vision tower, with biases everywhere: norm, attention,
// output projection, norm, GELU MLP. The weights are seeded by tensor name, so the order here only
// decides the file's layout.
void push_vision_block(ModelSpec& spec, int il, std::int64_t n, std::int64_t n_ff, QkvLayout qkv) {
  auto& t = spec.tensors;
  t.push_back(ones(vblk(il, "ln1.weight"), n));
  t.push_back(small(vblk(il, "ln1.bias"), n));
  if (qkv == QkvLayout::fused) {
    t.push_back(matrix(vblk(il, "attn_qkv.weight"), n, 3 * n));
    t.push_back(small(vblk(il, "attn_qkv.bias"), 3 * n));
  } else {
    for (const char* proj : {"attn_q", "attn_k", "attn_v"}) {
      t.push_back(matrix(vblk(il, std::format("{}.weight", proj)), n, n));
      t.push_back(small(vblk(il, std::format("{}.bias", proj)), n));
    }
  }
  t.push_back(matrix(vblk(il, "attn_out.weight"), n, n));
  t.push_back(small(vblk(il, "attn_out.bias"), n));
  t.push_back(ones(vblk(il, "ln2.weight"), n));
  t.push_back(small(vblk(il, "ln2.bias"), n));
  t.push_back(matrix(vblk(il, "ffn_up.weight"), n, n_ff));
  t.push_back(small(vblk(il, "ffn_up.bias"), n_ff));
  t.push_back(matrix(vblk(il, "ffn_down.weight"), n_ff, n));
  t.push_back(small(vblk(il, "ffn_down.bias"), n));
}

// A SigLIP vision tower with Gemma 3's projector: patches, a learned position per patch, pre-norm
// transformer blocks (GELU MLP), a final norm, an average pool of merge×merge patches, an RMS norm
// and a linear map into the text model's embedding width. Every image is resized to
// image_size² and gives (image_size / patch / merge)² tokens, which attend to each other both ways.
struct SiglipShape {
  std::uint32_t n_embd, n_ff, n_layer, n_head, image_size, patch, text_embd;
};

ModelSpec gemma3_projector(std::string preset, std::string display, const SiglipShape& s) {
  ModelSpec spec{.preset = std::move(preset), .architecture = "clip", .display_name = std::move(display),
                 .default_weight_type = "f16", .vocab = {.size = 0, .n_regular = 0}};
  spec.file_kind = "mmproj";
  spec.hparams = {
      {"projector_type", std::string("gemma3")},
      {"has_vision_encoder", true},
      {"use_gelu", true},
      {"vision.image_size", s.image_size},
      {"vision.patch_size", s.patch},
      {"vision.embedding_length", s.n_embd},
      {"vision.feed_forward_length", s.n_ff},
      {"vision.block_count", s.n_layer},
      {"vision.attention.head_count", s.n_head},
      {"vision.attention.layer_norm_epsilon", 1e-6f},
      {"vision.projection_dim", s.text_embd},
      {"vision.image_mean", std::vector<float>{0.5f, 0.5f, 0.5f}},
      {"vision.image_std", std::vector<float>{0.5f, 0.5f, 0.5f}},
  };
  const std::int64_t n = s.n_embd;
  const std::int64_t patches = static_cast<std::int64_t>(s.image_size / s.patch) * (s.image_size / s.patch);
  const float patch_fan_in = static_cast<float>(3 * s.patch * s.patch);
  spec.tensors.push_back(f32_matrix("v.patch_embd.weight", {s.patch, s.patch, 3, n}, 1.0f / std::sqrt(patch_fan_in)));
  spec.tensors.push_back(small("v.patch_embd.bias", n));
  spec.tensors.push_back(f32_matrix("v.position_embd.weight", {n, patches}, 0.02f));
  for (int il = 0; il < static_cast<int>(s.n_layer); ++il) push_vision_block(spec, il, n, s.n_ff, QkvLayout::separate);
  spec.tensors.push_back(ones("v.post_ln.weight", n));
  spec.tensors.push_back(small("v.post_ln.bias", n));
  spec.tensors.push_back(ones("mm.soft_emb_norm.weight", n));
  spec.tensors.push_back(f32_matrix("mm.input_projection.weight", {s.text_embd, n}, 1.0f / std::sqrt(static_cast<float>(n))));
  return spec;
}

// Qwen3-VL's vision tower and merger (Qwen3.5 converts to the same): two patch kernels summed, a
// learned position grid resized to the image's patches, blocks with a fused QKV and 2-D rotary
// positions, then 2×2 patches merged through an MLP into the text width. Dynamic resolution: an
// image keeps its aspect and gives (W/32)·(H/32) tokens after a resize into [8, 4096] tokens'
// worth of pixels; causal. With an M-RoPE text model (tiny-qwen3vl, qwen3vl-2b) libmtmd gives its
// tokens (t, y, x) positions; with any other they take one position each.
//
// Deepstack: after each block listed in `deepstack`, that block's output goes through a merger of
// its own (2×2 patches concatenated, LayerNorm over the 4n values, an MLP of the main merger's
// shape into the text width), and libmtmd appends those outputs to each image token's row after
// the main one: the projector's output width is text_embd × (1 + deepstack.size()), which must be
// the text model's input width (qwen3vl.n_deepstack_layers = deepstack.size()). libmtmd counts
// the mergers from the tensors; llama.cpp's converter also writes the bool array
// clip.vision.is_deepstack_layers, which libmtmd does not read and which is left out here.
struct Qwen3VlShape {
  std::uint32_t n_embd, n_ff, n_layer, n_head, grid, text_embd;
  std::vector<int> deepstack;  // vision block indices, ascending
};

ModelSpec qwen3vl_projector(std::string preset, std::string display, const Qwen3VlShape& s) {
  constexpr std::uint32_t patch = 16;
  ModelSpec spec{.preset = std::move(preset), .architecture = "clip", .display_name = std::move(display),
                 .default_weight_type = "f16", .vocab = {.size = 0, .n_regular = 0}};
  spec.file_kind = "mmproj";
  spec.hparams = {
      {"projector_type", std::string("qwen3vl_merger")},
      {"has_vision_encoder", true},
      {"use_gelu", true},
      {"vision.image_size", s.grid * patch},
      {"vision.patch_size", patch},
      {"vision.embedding_length", s.n_embd},
      {"vision.feed_forward_length", s.n_ff},
      {"vision.block_count", s.n_layer},
      {"vision.attention.head_count", s.n_head},
      {"vision.attention.layer_norm_epsilon", 1e-6f},
      {"vision.projection_dim", s.text_embd},
      {"vision.spatial_merge_size", std::uint32_t{2}},
      {"vision.image_mean", std::vector<float>{0.5f, 0.5f, 0.5f}},
      {"vision.image_std", std::vector<float>{0.5f, 0.5f, 0.5f}},
  };
  const std::int64_t n = s.n_embd;
  const float patch_fan_in = static_cast<float>(3 * patch * patch);
  spec.tensors.push_back(f32_matrix("v.patch_embd.weight", {patch, patch, 3, n}, 1.0f / std::sqrt(patch_fan_in)));
  spec.tensors.push_back(f32_matrix("v.patch_embd.weight.1", {patch, patch, 3, n}, 1.0f / std::sqrt(patch_fan_in)));
  spec.tensors.push_back(small("v.patch_embd.bias", n));
  spec.tensors.push_back(f32_matrix("v.position_embd.weight", {n, static_cast<std::int64_t>(s.grid) * s.grid}, 0.02f));
  for (int il = 0; il < static_cast<int>(s.n_layer); ++il) push_vision_block(spec, il, n, s.n_ff, QkvLayout::fused);
  spec.tensors.push_back(ones("v.post_ln.weight", n));
  spec.tensors.push_back(small("v.post_ln.bias", n));
  spec.tensors.push_back(matrix("mm.0.weight", 4 * n, 4 * n));
  spec.tensors.push_back(small("mm.0.bias", 4 * n));
  spec.tensors.push_back(matrix("mm.2.weight", 4 * n, s.text_embd));
  spec.tensors.push_back(small("mm.2.bias", s.text_embd));
  for (const int il : s.deepstack) {
    const auto ds = [il](std::string_view what) { return std::format("v.deepstack.{}.{}", il, what); };
    spec.tensors.push_back(ones(ds("norm.weight"), 4 * n));
    spec.tensors.push_back(small(ds("norm.bias"), 4 * n));
    spec.tensors.push_back(matrix(ds("fc1.weight"), 4 * n, 4 * n));
    spec.tensors.push_back(small(ds("fc1.bias"), 4 * n));
    spec.tensors.push_back(matrix(ds("fc2.weight"), 4 * n, s.text_embd));
    spec.tensors.push_back(small(ds("fc2.bias"), s.text_embd));
  }
  return spec;
}

// No deepstack mergers: its output is 64 wide, the input width of `tiny` and of tiny-qwen3vl
// (which has no deepstack layers).
ModelSpec tiny_qwen3vl_mmproj() {
  return qwen3vl_projector("tiny-qwen3vl-mmproj", "prefixd tiny Qwen3-VL-style projector (random)",
                           {.n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .grid = 16, .text_embd = 64});
}

// Qwen3-VL-2B's tower (1024 wide, 24 layers, a 48×48 position grid) into its 2048-wide text model,
// with its deepstack mergers after blocks 5, 11 and 17 (deepstack_visual_indexes): 4 × 2048 values
// per image token, the input width of qwen3vl-2b (3 deepstack layers).
ModelSpec qwen3vl_2b_mmproj() {
  return qwen3vl_projector("qwen3vl-2b-mmproj", "prefixd qwen3vl-2b projector (random)",
                           {.n_embd = 1024, .n_ff = 4096, .n_layer = 24, .n_head = 16, .grid = 48, .text_embd = 2048,
                            .deepstack = {5, 11, 17}});
}

// ---- Qwen2-VL and Qwen2.5-VL: dynamic resolution, 2-D rotary positions, no learned positions --

// What both towers share, as libmtmd loads them: 14-pixel patches embedded by two kernels whose
// outputs are summed (the two frames of the original 3-D patch convolution; a still image feeds
// the same pixels to both), no patch bias and no position table (positions are rotary only),
// blocks with separate Q, K and V (the converter splits the fused QKV), a final norm (the
// merger's ln_q), then 2×2 neighbouring patches concatenated and mapped through a GELU MLP into
// the text width. An image keeps its aspect ratio, is resized to a multiple of 28 pixels a side
// within [8, 4096] tokens' worth of pixels and gives (W/28)·(H/28) tokens. With an M-RoPE text
// model (qwen2vl) libmtmd gives the image's tokens (t, y, x) positions; with any other its tokens
// take one position each.
constexpr std::uint32_t kQwenVlPatch = 14;

std::vector<MetaEntry> qwen_vl_hparams(std::string projector_type, std::uint32_t n_embd, std::uint32_t n_ff,
                                       std::uint32_t n_layer, std::uint32_t n_head, std::uint32_t text_embd) {
  return {
      {"projector_type", std::move(projector_type)},
      {"has_vision_encoder", true},
      // Required, but images are sized dynamically: 560 is what the converter writes by default.
      {"vision.image_size", std::uint32_t{560}},
      {"vision.patch_size", kQwenVlPatch},
      {"vision.embedding_length", n_embd},
      {"vision.feed_forward_length", n_ff},
      {"vision.block_count", n_layer},
      {"vision.attention.head_count", n_head},
      {"vision.attention.layer_norm_epsilon", 1e-6f},
      {"vision.projection_dim", text_embd},
      {"vision.spatial_merge_size", std::uint32_t{2}},
      // OpenAI CLIP's normalisation, which both models' preprocessors use.
      {"vision.image_mean", std::vector<float>{0.48145466f, 0.4578275f, 0.40821073f}},
      {"vision.image_std", std::vector<float>{0.26862954f, 0.26130258f, 0.27577711f}},
  };
}

void push_qwen_vl_patch_kernels(ModelSpec& spec, std::int64_t n) {
  constexpr std::int64_t p = kQwenVlPatch;
  const float stddev = 1.0f / std::sqrt(static_cast<float>(3 * p * p));
  spec.tensors.push_back(f32_matrix("v.patch_embd.weight", {p, p, 3, n}, stddev));
  spec.tensors.push_back(f32_matrix("v.patch_embd.weight.1", {p, p, 3, n}, stddev));
}

// The merger: the final norm (a LayerNorm with bias for Qwen2-VL, an RMS norm for Qwen2.5-VL)
// and the MLP over four concatenated patches.
void push_qwen_vl_merger(ModelSpec& spec, std::int64_t n, std::int64_t text_embd, bool norm_bias) {
  auto& t = spec.tensors;
  t.push_back(ones("v.post_ln.weight", n));
  if (norm_bias) t.push_back(small("v.post_ln.bias", n));
  t.push_back(matrix("mm.0.weight", 4 * n, 4 * n));
  t.push_back(small("mm.0.bias", 4 * n));
  t.push_back(matrix("mm.2.weight", 4 * n, text_embd));
  t.push_back(small("mm.2.bias", text_embd));
}

// Qwen2-VL: LayerNorms and a quick-GELU MLP (no use_gelu/use_silu key selects it), every block
// attending over the whole image.
struct Qwen2VlShape {
  std::uint32_t n_embd, n_ff, n_layer, n_head, text_embd;
};

ModelSpec qwen2vl_projector(std::string preset, std::string display, const Qwen2VlShape& s) {
  ModelSpec spec{.preset = std::move(preset), .architecture = "clip", .display_name = std::move(display),
                 .default_weight_type = "f16", .vocab = {.size = 0, .n_regular = 0}};
  spec.file_kind = "mmproj";
  spec.hparams = qwen_vl_hparams("qwen2vl_merger", s.n_embd, s.n_ff, s.n_layer, s.n_head, s.text_embd);
  const std::int64_t n = s.n_embd;
  push_qwen_vl_patch_kernels(spec, n);
  for (int il = 0; il < static_cast<int>(s.n_layer); ++il) push_vision_block(spec, il, n, s.n_ff, QkvLayout::separate);
  push_qwen_vl_merger(spec, n, s.text_embd, /*norm_bias=*/true);
  return spec;
}

// Qwen2.5-VL: RMS norms (weights only) and a gated SiLU MLP with biases; attention is windowed
// (112-pixel windows, 4×4 tokens) except in every n_wa_pattern-th block, which sees the whole
// image (the converter derives the pattern from fullatt_block_indexes, which must be evenly
// spaced; libmtmd requires the key).
struct Qwen25VlShape {
  std::uint32_t n_embd, n_ff, n_layer, n_head, n_wa_pattern, text_embd;
};

ModelSpec qwen25vl_projector(std::string preset, std::string display, const Qwen25VlShape& s) {
  ModelSpec spec{.preset = std::move(preset), .architecture = "clip", .display_name = std::move(display),
                 .default_weight_type = "f16", .vocab = {.size = 0, .n_regular = 0}};
  spec.file_kind = "mmproj";
  spec.hparams = qwen_vl_hparams("qwen2.5vl_merger", s.n_embd, s.n_ff, s.n_layer, s.n_head, s.text_embd);
  spec.hparams.push_back({"use_silu", true});
  spec.hparams.push_back({"vision.n_wa_pattern", s.n_wa_pattern});
  const std::int64_t n = s.n_embd, n_ff = s.n_ff;
  push_qwen_vl_patch_kernels(spec, n);
  auto& t = spec.tensors;
  for (int il = 0; il < static_cast<int>(s.n_layer); ++il) {
    t.push_back(ones(vblk(il, "ln1.weight"), n));
    for (const char* proj : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      t.push_back(matrix(vblk(il, std::format("{}.weight", proj)), n, n));
      t.push_back(small(vblk(il, std::format("{}.bias", proj)), n));
    }
    t.push_back(ones(vblk(il, "ln2.weight"), n));
    t.push_back(matrix(vblk(il, "ffn_gate.weight"), n, n_ff));
    t.push_back(small(vblk(il, "ffn_gate.bias"), n_ff));
    t.push_back(matrix(vblk(il, "ffn_up.weight"), n, n_ff));
    t.push_back(small(vblk(il, "ffn_up.bias"), n_ff));
    t.push_back(matrix(vblk(il, "ffn_down.weight"), n_ff, n));
    t.push_back(small(vblk(il, "ffn_down.bias"), n));
  }
  push_qwen_vl_merger(spec, n, s.text_embd, /*norm_bias=*/false);
  return spec;
}

// Two 64-wide blocks into `tiny` / `tiny-qwen2vl` (64 wide). The FFN width must differ from the
// tower's width: libmtmd swaps up and down of a Qwen-VL FFN whose down projection starts at n_embd.
ModelSpec tiny_qwen2vl_mmproj() {
  return qwen2vl_projector("tiny-qwen2vl-mmproj", "prefixd tiny Qwen2-VL-style projector (random)",
                           {.n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .text_embd = 64});
}

// The same tower into 128 wide: qwen35-tiny (Qwen3.5's hybrid layout, which takes M-RoPE
// positions), gemma3-tiny, mamba2-tiny.
ModelSpec tiny128_qwen2vl_mmproj() {
  return qwen2vl_projector("tiny128-qwen2vl-mmproj", "prefixd tiny Qwen2-VL-style projector into 128 (random)",
                           {.n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .text_embd = 128});
}

// Qwen2-VL-7B's tower (embed_dim 1280, 32 blocks of 16 heads, MLP 4 × 1280) and merger into its
// 3584-wide text model: the real shapes, random weights (~675 M parameters). The converter writes
// the vision config's hidden_size (3584) as feed_forward_length; the MLP is 5120 wide.
ModelSpec qwen2vl_7b_mmproj() {
  return qwen2vl_projector("qwen2vl-7b-mmproj", "prefixd qwen2vl-7b projector (random)",
                           {.n_embd = 1280, .n_ff = 5120, .n_layer = 32, .n_head = 16, .text_embd = 3584});
}

// Two blocks, the first windowed and the second global (n_wa_pattern 2), into 64 wide.
ModelSpec tiny_qwen25vl_mmproj() {
  return qwen25vl_projector("tiny-qwen25vl-mmproj", "prefixd tiny Qwen2.5-VL-style projector (random)",
                            {.n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .n_wa_pattern = 2, .text_embd = 64});
}

// Qwen2.5-VL-7B's tower (1280 wide, 32 blocks of 16 heads, gated MLP 3420, full attention in
// blocks 7, 15, 23 and 31) and merger into 3584: the real shapes, random weights (~675 M
// parameters).
ModelSpec qwen25vl_7b_mmproj() {
  return qwen25vl_projector("qwen25vl-7b-mmproj", "prefixd qwen25vl-7b projector (random)",
                            {.n_embd = 1280, .n_ff = 3420, .n_layer = 32, .n_head = 16, .n_wa_pattern = 8,
                             .text_embd = 3584});
}

// Qwen2-Audio's encoder (Whisper's) and projector: 128 log-mel bins of 16 kHz audio, two 1-D
// convolutions (the second of stride 2), a learned position per frame (1500 per 30-second window),
// pre-norm blocks (no bias on K, as Whisper), an average pool over pairs of frames, a final norm
// and one linear map into the text width. libmtmd cuts audio into 30-second windows of 750 tokens
// each, one position per token, causal.
struct Qwen2AudioShape {
  std::uint32_t n_embd, n_ff, n_layer, n_head, text_embd;
};

ModelSpec qwen2a_projector(std::string preset, std::string display, const Qwen2AudioShape& s) {
  constexpr std::uint32_t mel_bins = 128;
  constexpr std::int64_t frames = 1500;  // encoder positions per window
  ModelSpec spec{.preset = std::move(preset), .architecture = "clip", .display_name = std::move(display),
                 .default_weight_type = "f16", .vocab = {.size = 0, .n_regular = 0}};
  spec.file_kind = "mmproj";
  spec.hparams = {
      {"projector_type", std::string("qwen2a")},
      {"has_audio_encoder", true},
      {"audio.embedding_length", s.n_embd},
      {"audio.feed_forward_length", s.n_ff},
      {"audio.block_count", s.n_layer},
      {"audio.attention.head_count", s.n_head},
      {"audio.attention.layer_norm_epsilon", 1e-5f},
      {"audio.projection_dim", s.text_embd},
      {"audio.num_mel_bins", mel_bins},
  };
  const std::int64_t n = s.n_embd;
  auto& t = spec.tensors;
  // The convolutions' biases are [1, n]: they broadcast over the frames of the [frames, n] output.
  t.push_back(f32_matrix("a.conv1d.1.weight", {3, mel_bins, n}, 1.0f / std::sqrt(3.0f * mel_bins)));
  t.push_back(f32_matrix("a.conv1d.1.bias", {1, n}, 0.02f));
  t.push_back(f32_matrix("a.conv1d.2.weight", {3, n, n}, 1.0f / std::sqrt(3.0f * static_cast<float>(n))));
  t.push_back(f32_matrix("a.conv1d.2.bias", {1, n}, 0.02f));
  t.push_back(f32_matrix("a.position_embd.weight", {n, frames}, 0.02f));
  for (int il = 0; il < static_cast<int>(s.n_layer); ++il) {
    const auto ablk = [il](std::string_view what) { return std::format("a.blk.{}.{}", il, what); };
    t.push_back(ones(ablk("ln1.weight"), n));
    t.push_back(small(ablk("ln1.bias"), n));
    t.push_back(matrix(ablk("attn_q.weight"), n, n));
    t.push_back(small(ablk("attn_q.bias"), n));
    t.push_back(matrix(ablk("attn_k.weight"), n, n));  // no bias: the encoder asserts there is none
    t.push_back(matrix(ablk("attn_v.weight"), n, n));
    t.push_back(small(ablk("attn_v.bias"), n));
    t.push_back(matrix(ablk("attn_out.weight"), n, n));
    t.push_back(small(ablk("attn_out.bias"), n));
    t.push_back(ones(ablk("ln2.weight"), n));
    t.push_back(small(ablk("ln2.bias"), n));
    t.push_back(matrix(ablk("ffn_up.weight"), n, s.n_ff));
    t.push_back(small(ablk("ffn_up.bias"), s.n_ff));
    t.push_back(matrix(ablk("ffn_down.weight"), s.n_ff, n));
    t.push_back(small(ablk("ffn_down.bias"), n));
  }
  t.push_back(ones("a.post_ln.weight", n));
  t.push_back(small("a.post_ln.bias", n));
  t.push_back(matrix("mm.a.fc.weight", n, s.text_embd));
  t.push_back(small("mm.a.fc.bias", s.text_embd));
  return spec;
}

// A one-block encoder for the dense `tiny` model (64 wide).
ModelSpec tiny_qwen2a_mmproj() {
  return qwen2a_projector("tiny-qwen2a-mmproj", "prefixd tiny Qwen2-Audio projector (random)",
                          {.n_embd = 64, .n_ff = 128, .n_layer = 1, .n_head = 4, .text_embd = 64});
}

// The same encoder into 128 wide: gemma3-tiny and mamba2-tiny.
ModelSpec tiny128_qwen2a_mmproj() {
  return qwen2a_projector("tiny128-qwen2a-mmproj", "prefixd 128-wide tiny Qwen2-Audio projector (random)",
                          {.n_embd = 64, .n_ff = 128, .n_layer = 1, .n_head = 4, .text_embd = 128});
}

// Qwen2-Audio-7B's encoder (Whisper large-v3: 1280 wide, 32 blocks, 20 heads) into its 4096-wide
// text model: the real shapes, random weights (~640 M parameters).
ModelSpec qwen2_audio_7b_mmproj() {
  return qwen2a_projector("qwen2-audio-7b-mmproj", "prefixd qwen2-audio-7b projector (random)",
                          {.n_embd = 1280, .n_ff = 5120, .n_layer = 32, .n_head = 20, .text_embd = 4096});
}

// 64×64-pixel images in 4-pixel patches, pooled 4×4: 16 tokens per image.
ModelSpec gemma3_tiny_mmproj() {
  return gemma3_projector("gemma3-tiny-mmproj", "prefixd gemma3-tiny projector (random)",
                          {.n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .image_size = 64, .patch = 4,
                           .text_embd = 128});
}

// The same tower for the dense `tiny` model (64 wide).
ModelSpec tiny_mmproj() {
  return gemma3_projector("tiny-mmproj", "prefixd tiny projector (random)",
                          {.n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .image_size = 64, .patch = 4,
                           .text_embd = 64});
}

// The same tower into 256 wide: the hybrid and sliding-window models llama.cpp's test-llama-archs
// writes (jamba, falcon-h1, gemma2, gpt-oss).
ModelSpec tiny256_mmproj() {
  return gemma3_projector("tiny256-mmproj", "prefixd 256-wide tiny projector (random)",
                          {.n_embd = 64, .n_ff = 128, .n_layer = 2, .n_head = 4, .image_size = 64, .patch = 4,
                           .text_embd = 256});
}

// Gemma 3 4B's SigLIP-So400m tower (1152 wide, 27 layers, 896-pixel images in 14-pixel patches,
// 256 tokens per image), projecting into 2560: the real shapes, random weights (~420 M parameters).
ModelSpec gemma3_4b_mmproj() {
  return gemma3_projector("gemma3-4b-mmproj", "prefixd gemma3-4b projector (random)",
                          {.n_embd = 1152, .n_ff = 4304, .n_layer = 27, .n_head = 16, .image_size = 896, .patch = 14,
                           .text_embd = 2560});
}

}  // namespace

const std::vector<ProjectorPreset>& projector_presets() {
  static const std::vector<ProjectorPreset> table = {
      {"gemma3-tiny-mmproj", "Gemma 3 (SigLIP) projector for gemma3-tiny: 64-pixel images, 16 tokens each", gemma3_tiny_mmproj},
      {"tiny-mmproj", "Gemma 3 (SigLIP) projector for tiny (64 wide): 64-pixel images, 16 tokens each", tiny_mmproj},
      {"tiny256-mmproj", "Gemma 3 (SigLIP) projector into 256 wide (test-llama-archs models): 16 tokens per image", tiny256_mmproj},
      {"tiny-qwen3vl-mmproj", "Qwen3-VL-style projector (no deepstack) for tiny and tiny-qwen3vl (64 wide): tokens by image size, (W/32)x(H/32)", tiny_qwen3vl_mmproj},
      {"qwen3vl-2b-mmproj", "Qwen3-VL 2B's vision tower, merger and 3 deepstack mergers into 2048 wide (4 x 2048 per token, for qwen3vl-2b), f16 (~820 MB)", qwen3vl_2b_mmproj},
      {"gemma3-4b-mmproj", "Gemma 3 4B's SigLIP-So400m projector shapes into 2560 wide, f16 (~840 MB)", gemma3_4b_mmproj},
      {"tiny-qwen2vl-mmproj", "Qwen2-VL-style projector for tiny-qwen2vl (64 wide): tokens by image size, (W/28)x(H/28)", tiny_qwen2vl_mmproj},
      {"tiny128-qwen2vl-mmproj", "Qwen2-VL-style projector into 128 wide (qwen35-tiny, gemma3-tiny, mamba2-tiny): (W/28)x(H/28) tokens", tiny128_qwen2vl_mmproj},
      {"qwen2vl-7b-mmproj", "Qwen2-VL 7B's vision tower and merger shapes into 3584 wide, f16 (~1.3 GB)", qwen2vl_7b_mmproj},
      {"tiny-qwen25vl-mmproj", "Qwen2.5-VL-style projector (window attention) for tiny-qwen2vl (64 wide): (W/28)x(H/28) tokens", tiny_qwen25vl_mmproj},
      {"qwen25vl-7b-mmproj", "Qwen2.5-VL 7B's vision tower (window attention) and merger shapes into 3584 wide, f16 (~1.3 GB)", qwen25vl_7b_mmproj},
      {"tiny-qwen2a-mmproj", "Qwen2-Audio (Whisper) audio projector for tiny (64 wide): 750 tokens per 30 s of audio", tiny_qwen2a_mmproj},
      {"tiny128-qwen2a-mmproj", "Qwen2-Audio audio projector into 128 wide (gemma3-tiny, mamba2-tiny): 750 tokens per 30 s", tiny128_qwen2a_mmproj},
      {"qwen2-audio-7b-mmproj", "Qwen2-Audio 7B's audio encoder and projector shapes into 4096 wide, f16 (~1.3 GB)", qwen2_audio_7b_mmproj},
  };
  return table;
}

}  // namespace prefixd::modelgen
