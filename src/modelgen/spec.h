// Internal description of a model to generate: metadata, tensor layout and how each tensor's
// values are drawn. Presets build a ModelSpec; the writer turns it into a GGUF file. Nothing here
// knows about gguf.h, so specs can be inspected and tested without touching a file.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace prefixd::modelgen {

// One GGUF metadata value. Arrays are stored as vectors; the writer maps each alternative to the
// matching gguf type (u32, i32, f32, bool, str, arr[u32], arr[i32], arr[f32], arr[str]).
using MetaValue = std::variant<std::uint32_t, std::int32_t, float, bool, std::string, std::vector<std::uint32_t>,
                               std::vector<std::int32_t>, std::vector<float>, std::vector<std::string>>;

struct MetaEntry {
  std::string key;
  MetaValue value;
};

// How a tensor's values are drawn. Every variant is a pure function of (seed, tensor name,
// element index), which is what makes files byte-identical for the same seed.
struct Normal {
  float stddev;  // N(0, stddev^2)
};
struct Uniform {
  float low, high;  // U[low, high)
};
struct Constant {
  float value;
};
// Mamba-style time-step bias: dt ~ log-uniform in [dt_min, dt_max], stored as softplus^-1(dt),
// so that softplus(bias) lands in a range where the recurrence neither freezes nor explodes.
struct InverseSoftplusLogUniform {
  float dt_min, dt_max;
};
// Chosen rows of another tensor, the way llama.cpp's converter builds Qwen3-Reranker's classifier
// from the LM head's rows for "yes" and "no": row i of this tensor is row rows[i] of `source`, a
// tensor with the same row length drawn with `source_init` (a linear weight). The source need not
// be written to the file; its values are recomputed from (seed, source name, its chunk).
struct RowsOf {
  std::string source;
  Normal source_init;
  std::vector<std::int64_t> rows;
};
using Init = std::variant<Normal, Uniform, Constant, InverseSoftplusLogUniform, RowsOf>;

enum class StorageClass {
  matrix,  // a linear weight: stored in the model's weight type (f32 / f16 / q8_0)
  f32,     // norms, biases, SSM parameters, conv kernels: always f32 (llama.cpp requires it)
};

struct TensorSpec {
  std::string name;            // GGUF tensor name, e.g. "blk.0.attn_q.weight"
  std::vector<std::int64_t> ne;  // ggml order: ne[0] is the row length (the contiguous dim)
  Init init;
  StorageClass storage = StorageClass::matrix;

  std::int64_t row_length() const { return ne.front(); }
  std::int64_t element_count() const;
};

enum class TokenizerKind {
  byte_level_bpe,  // GPT-2 style BPE with ChatML special tokens (tokenizer.ggml.model "gpt2")
  wordpiece,       // BERT's uncased WordPiece (tokenizer.ggml.model "bert"); n_regular is unused
};

// Tokenizer layout a preset asks for; the vocabulary module fills it in.
struct VocabLayout {
  std::uint32_t size = 0;       // total number of tokens == embedding rows
  std::uint32_t n_regular = 0;  // byte tokens + merges + filler words; specials follow
  TokenizerKind kind = TokenizerKind::byte_level_bpe;
};

struct ModelSpec {
  std::string preset;
  std::string architecture;  // general.architecture; also the prefix of hyper-parameter keys
  std::string display_name;  // general.name
  std::string default_weight_type;  // "f32", "f16" or "q8_0"
  VocabLayout vocab;
  std::vector<MetaEntry> hparams;  // keys without the architecture prefix, e.g. "block_count"
  std::vector<TensorSpec> tensors;
  // "model", or "mmproj" for a vision projector: no tokenizer (vocab.size is 0), keys under
  // "clip." (architecture "clip"), or "adapter" for a LoRA adapter (make_lora_spec below).
  std::string file_kind = "model";
  // Keys written as they are, without the architecture prefix (an adapter's "adapter.type", ...).
  std::vector<MetaEntry> metadata;
};

// Builds the spec for a preset name; throws std::runtime_error for an unknown name.
ModelSpec make_spec(const std::string& preset);

// Vision projector presets (projector_presets.cpp): make_spec finds them too.
struct ProjectorPreset {
  std::string name;
  std::string summary;
  ModelSpec (*build)();
};
const std::vector<ProjectorPreset>& projector_presets();

// A LoRA adapter for a text model (lora.cpp): a pair of low-rank matrices per targeted weight,
// which libllama's llama_adapter_lora_init loads for that model.
struct LoraOptions {
  std::uint32_t rank = 8;
  float alpha = 0.0f;                // adapter.lora.alpha; 0: the rank (libllama's scale alpha/rank is 1)
  std::vector<std::string> targets;  // weight names without "blk.N." and ".weight"; empty: the defaults
};

// attn_q, attn_k, attn_v, attn_output: every block's attention projections, as common adapters do.
std::vector<std::string> default_lora_targets();

// The adapter spec for `base` (a text model's spec, after any --layers cut): tensors
// "<base weight>.lora_a" and ".lora_b" for every 2-D weight of a block that a target names (or the
// head, target "output"). Throws std::runtime_error on a projector, a zero rank, a negative alpha,
// or a target that names no weight of the base model.
ModelSpec make_lora_spec(const ModelSpec& base, const LoraOptions& lora);

}  // namespace prefixd::modelgen
