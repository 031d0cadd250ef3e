// prefixd modelgen — writes GGUF model files with random weights and real architecture shapes.
//
// Owns: presets (architecture hyper-parameters and tensor layouts), a deterministic weight
// generator, a byte-level BPE vocabulary with ChatML special tokens, a ChatML chat template (and a
// rerank prompt), and a BERT-style WordPiece vocabulary for the encoder presets.
// Must not know: llama.h (files are written with gguf.h from libggml), serving, caching.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prefixd::modelgen {

struct PresetInfo {
  std::string name;
  std::string architecture;  // GGUF general.architecture
  std::string summary;       // one line for --help / --list
};

std::vector<PresetInfo> presets();

struct GenerateOptions {
  std::string preset = "tiny";
  std::string out_path;
  std::uint64_t seed = 42;
  std::string weight_type;  // "", "f32", "f16", "q8_0"; "" = the preset's default
  // Keep only the first `layers` blocks (0: all). Weights are drawn per tensor name, so with the
  // same seed the kept blocks, embeddings and head equal the full model's: a small drafter whose
  // vocabulary and first layers are the larger model's.
  std::uint32_t layers = 0;
  // Blocks from this index on write nothing into the residual stream (their output projections are
  // zero), though they are computed at full cost: the model then computes what its first
  // `inert_from` blocks alone compute, as slowly as the whole. 0: no inert blocks. With `layers`
  // above, the pair is a target and a drafter whose guesses are right by construction.
  std::uint32_t inert_from = 0;
  // Above 0: write a LoRA adapter of this rank for the preset instead of the model (see
  // make_lora_spec in spec.h); `seed` seeds its weights, `layers` cuts the base model first.
  std::uint32_t lora_rank = 0;
  float lora_alpha = 0.0f;                // 0: the rank
  std::vector<std::string> lora_targets;  // empty: attn_q, attn_k, attn_v, attn_output
  bool quiet = false;
};

// Writes the file (atomically: a temporary file renamed into place). Throws std::runtime_error
// with the reason on an unknown preset, bad option or I/O failure.
void generate_model(const GenerateOptions& options);

}  // namespace prefixd::modelgen
