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
// matching gguf type (u32, i32, f32, bool, str, arr[u32], arr[i32], arr[f32]).
using MetaValue = std::variant<std::uint32_t, std::int32_t, float, bool, std::string,
                               std::vector<std::uint32_t>, std::vector<std::int32_t>, std::vector<float>>;

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
using Init = std::variant<Normal, Uniform, Constant, InverseSoftplusLogUniform>;

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

// Tokenizer layout a preset asks for; the vocabulary module fills it in.
struct VocabLayout {
  std::uint32_t size = 0;       // total number of tokens == embedding rows
  std::uint32_t n_regular = 0;  // byte tokens + merges + filler words; specials follow
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
  // "clip." (architecture "clip").
  std::string file_kind = "model";
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

}  // namespace prefixd::modelgen
