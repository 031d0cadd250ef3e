// LoRA adapters for the text presets, in the GGUF form libllama's llama_adapter_lora_init loads.
//
// What the loader checks (libllama, src/llama-adapter.cpp, as of 0.7.0), in our words:
// - metadata: general.type must be the string "adapter", adapter.type the string "lora", and
//   general.architecture must name the base model's architecture. adapter.lora.alpha is read as
//   f32 (absent counts as 0).
// - tensors: every name must end in ".lora_a" or ".lora_b" (a name ending in "_norm.weight" is
//   skipped; anything else refuses the file). Taking the suffix off must give the name of a tensor
//   of the base model, and each base tensor needs both halves.
// - shapes, in ggml order (ne[0] is the contiguous, input dimension): for a linear weight W with
//   ne = [n_in, n_out], lora_a is [n_in, rank] and lora_b is [rank, n_out]: lora_a's ne[0] must
//   equal W's ne[0], lora_b's ne[1] W's ne[1], and lora_a's ne[1] lora_b's ne[0]. The token
//   embedding table is laid out the other way round (both halves [rank, ...]); it is not offered
//   here. A mismatch is refused with "tensor '<name>' has incorrect shape".
// - types: the loader copies the bytes as they are and does not check the type; the halves go
//   through ggml_mul_mat as the first operand, so any type the backend multiplies works. We write
//   f32 (or f16): lora_b's rows are only `rank` long, too short for most quantized blocks.
//
// At inference each targeted projection computes W x + s * B (A x), where s is the requested
// adapter scale times alpha / rank (rank read from lora_b's ne[0]), or the scale alone when alpha
// is 0.
#include <cmath>
#include <format>
#include <set>
#include <stdexcept>
#include <string_view>

#include "modelgen/spec.h"

namespace prefixd::modelgen {

namespace {

// The name a target uses for a weight: "blk.3.attn_q.weight" -> "attn_q", "output.weight" ->
// "output"; empty for anything that is not a weight.
std::string target_of(std::string_view name) {
  constexpr std::string_view suffix = ".weight";
  if (!name.ends_with(suffix)) return {};
  name.remove_suffix(suffix.size());
  if (name.starts_with("blk.")) {
    const auto dot = name.find('.', 4);
    if (dot == std::string_view::npos) return {};
    name.remove_prefix(dot + 1);
  }
  return std::string(name);
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

std::vector<std::string> default_lora_targets() { return {"attn_q", "attn_k", "attn_v", "attn_output"}; }

ModelSpec make_lora_spec(const ModelSpec& base, const LoraOptions& lora) {
  if (base.file_kind != "model") {
    throw std::runtime_error(
        std::format("preset {} is not a text model: LoRA adapters are for text models", base.preset));
  }
  if (lora.rank == 0) throw std::runtime_error("the LoRA rank must be at least 1");
  if (!(lora.alpha >= 0.0f) || lora.alpha > 1e6f) {
    throw std::runtime_error(std::format("LoRA alpha {} is not a non-negative number", lora.alpha));
  }
  const std::vector<std::string> targets = lora.targets.empty() ? default_lora_targets() : lora.targets;
  const std::set<std::string> wanted(targets.begin(), targets.end());
  if (wanted.contains("token_embd")) {
    throw std::runtime_error("LoRA target token_embd is not supported (libllama lays its adapter out differently)");
  }

  const float alpha = lora.alpha == 0.0f ? static_cast<float>(lora.rank) : lora.alpha;
  const auto rank = static_cast<std::int64_t>(lora.rank);
  ModelSpec spec{.preset = base.preset,
                 .architecture = base.architecture,
                 .display_name = std::format("{} LoRA adapter, rank {}, alpha {}", base.display_name, lora.rank, alpha),
                 .default_weight_type = "f32",
                 .vocab = {},
                 .hparams = {},
                 .tensors = {},
                 .file_kind = "adapter",
                 .metadata = {{"adapter.type", std::string("lora")}, {"adapter.lora.alpha", alpha}}};

  std::set<std::string> matched;
  for (const TensorSpec& w : base.tensors) {
    const std::string target = target_of(w.name);
    if (!wanted.contains(target) || w.storage != StorageClass::matrix || w.ne.size() != 2) continue;
    matched.insert(target);
    const std::int64_t n_in = w.ne[0], n_out = w.ne[1];
    // A's rows have the base weight's fan-in, so A x has unit-ish spread for a normalized x; B's
    // spread of 0.5 / sqrt(rank) then makes B (A x) about half the size of W x at scale 1: enough
    // to change what a random model says, far from overflowing even f16 activations.
    spec.tensors.push_back({w.name + ".lora_a", {n_in, rank}, Normal{1.0f / std::sqrt(static_cast<float>(n_in))},
                            StorageClass::matrix});
    spec.tensors.push_back({w.name + ".lora_b", {rank, n_out}, Normal{0.5f / std::sqrt(static_cast<float>(rank))},
                            StorageClass::matrix});
  }
  std::vector<std::string> missing;
  for (const auto& t : targets) {
    if (!matched.contains(t)) missing.push_back(t);
  }
  if (!missing.empty()) {
    std::set<std::string> known;
    for (const TensorSpec& w : base.tensors) {
      const std::string target = target_of(w.name);
      if (!target.empty() && target != "token_embd" && w.storage == StorageClass::matrix && w.ne.size() == 2) {
        known.insert(target);
      }
    }
    throw std::runtime_error(std::format("preset {} has no weight for LoRA target(s) {} (its targets: {})", base.preset,
                                         join(missing), join({known.begin(), known.end()})));
  }
  return spec;
}

}  // namespace prefixd::modelgen
