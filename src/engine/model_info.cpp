// Reads model metadata from a loaded llama_model (family, shapes, K/V bytes per token) and the
// runtime signature of a context created from it.
#include <algorithm>
#include <filesystem>
#include <format>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

#include <llama.h>

#include "engine/llama_handles.h"
#include "engine/model_info_internal.h"

namespace prefixd::engine::detail {
namespace {

std::string meta_string(const llama_model* model, const std::string& key) {
  std::string buffer(256, '\0');
  int32_t n = llama_model_meta_val_str(model, key.c_str(), buffer.data(), buffer.size());
  if (n < 0) return {};
  if (static_cast<size_t>(n) >= buffer.size()) {
    buffer.assign(static_cast<size_t>(n) + 1, '\0');
    n = llama_model_meta_val_str(model, key.c_str(), buffer.data(), buffer.size());
  }
  buffer.resize(static_cast<size_t>(std::max(n, 0)));
  return buffer;
}

// Every metadata key of the model that starts with `prefix`, with its value, in key order.
std::map<std::string, std::string> meta_with_prefix(const llama_model* model, const std::string& prefix) {
  std::map<std::string, std::string> found;
  std::string key(256, '\0');
  for (int32_t i = 0; i < llama_model_meta_count(model); ++i) {
    int32_t n = llama_model_meta_key_by_index(model, i, key.data(), key.size());
    if (n >= 0 && static_cast<size_t>(n) >= key.size()) {
      key.assign(static_cast<size_t>(n) + 1, '\0');
      n = llama_model_meta_key_by_index(model, i, key.data(), key.size());
    }
    if (n < 0) continue;
    const std::string name(key.data(), static_cast<size_t>(n));
    if (name.starts_with(prefix)) found.emplace(name, meta_string(model, name));
  }
  return found;
}

int meta_int(const llama_model* model, const std::string& key, int fallback) {
  const std::string text = meta_string(model, key);
  if (text.empty()) return fallback;
  try {
    return std::stoi(text);
  } catch (const std::exception&) {
    return fallback;
  }
}

// How many layers use the window: libllama fixes each architecture's pattern in code and does not
// expose it, so the known patterns are listed; an unknown one counts every layer (an upper bound,
// which only makes the full window cache look more expensive than it is).
std::int32_t window_layer_count(const std::string& architecture, std::int32_t n_layer) {
  struct Pattern {
    const char* architecture;
    int windowed, period;
  };
  static constexpr Pattern kPatterns[] = {
      {"gemma3", 5, 6}, {"gemma3n", 4, 5}, {"gemma2", 1, 2}, {"gpt-oss", 1, 2}, {"cohere2", 3, 4},
      {"llama4", 3, 4}, {"exaone4", 3, 4}, {"smallthinker", 3, 4},
  };
  for (const Pattern& p : kPatterns) {
    if (architecture == p.architecture) {
      return n_layer / p.period * p.windowed + std::min(n_layer % p.period, p.windowed);
    }
  }
  return n_layer;
}

}  // namespace

ModelInfo describe_model(const llama_model* model, const std::string& path, const std::string& id_override) {
  ModelInfo info;
  info.path = path;
  info.id = id_override.empty() ? std::filesystem::path(path).stem().string() : id_override;
  info.architecture = meta_string(model, "general.architecture");
  char desc[256] = {};
  llama_model_desc(model, desc, sizeof desc);
  info.description = desc;
  info.n_ctx_train = llama_model_n_ctx_train(model);
  info.n_embd = llama_model_n_embd(model);
  info.n_layer = llama_model_n_layer(model);
  info.n_head = llama_model_n_head(model);
  info.n_head_kv = llama_model_n_head_kv(model);
  info.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  info.sliding_window = std::max(0, llama_model_n_swa(model));
  info.n_params = llama_model_n_params(model);
  info.model_bytes = llama_model_size(model);
  if (const char* tmpl = llama_model_chat_template(model, nullptr)) info.chat_template = tmpl;

  // libllama 0.7.0 aborts on a partial llama_memory_seq_cp for these (a GGML_ASSERT, not an error).
  static constexpr std::string_view kWholeCopyOnly[] = {"deepseek4", "qwen4exp", "glm5-next"};
  info.partial_copy_supported = std::ranges::find(kWholeCopyOnly, info.architecture) == std::end(kWholeCopyOnly);
  info.recurrence_in_chunks =
      info.architecture.starts_with("qwen35") || info.architecture == "qwen3next" || info.architecture == "kimi-linear";
  if (llama_model_is_hybrid(model)) {
    info.family = ModelFamily::hybrid;
  } else if (llama_model_is_recurrent(model)) {
    info.family = ModelFamily::recurrent;
  } else if (info.sliding_window > 0) {
    info.family = ModelFamily::sliding_window;
    info.n_swa_layers = window_layer_count(info.architecture, info.n_layer);
  } else {
    info.family = ModelFamily::dense;
  }

  // K/V cache cells are F16 by default: 2 bytes per element, K and V per KV head per layer.
  const int head_dim_default = info.n_head > 0 ? info.n_embd / info.n_head : 0;
  const int key_length = meta_int(model, info.architecture + ".attention.key_length", head_dim_default);
  const int value_length = meta_int(model, info.architecture + ".attention.value_length", head_dim_default);
  if (info.family != ModelFamily::recurrent) {
    info.kv_bytes_per_token = static_cast<std::size_t>(info.n_layer) * static_cast<std::size_t>(info.n_head_kv) *
                              static_cast<std::size_t>(key_length + value_length) * 2u;
  }
  return info;
}

std::string runtime_signature(const llama_model* model, const llama_context* ctx, const llama_context_params& params) {
  std::string out;
  auto add = [&out](std::string_view key, const auto& value) { out += std::format("{}={};", key, value); };
  // A new libllama may compute K/V differently or serialize them in another layout.
  add("llama", llama_version());
  add("state_seq_version", LLAMA_STATE_SEQ_VERSION);
  add("type_k", ggml_type_name(params.type_k));
  add("type_v", ggml_type_name(params.type_v));
  // Flash attention stores V untransposed, and libllama refuses to read state of the other layout.
  add("flash_attn", llama_flash_attn_type_name(params.flash_attn_type));
  add("swa_full", params.swa_full ? "on" : "off");
  add("kv_unified", params.kv_unified ? "on" : "off");
  add("rope_type", static_cast<int>(llama_model_rope_type(model)));
  add("rope_freq_scale_train", llama_model_rope_freq_scale_train(model));
  // The context's own RoPE overrides (0 or negative: the model's value, stated below).
  add("ctx_rope", std::format("{},{},{},{},{},{},{},{}", static_cast<int>(params.rope_scaling_type), params.rope_freq_base,
                              params.rope_freq_scale, params.yarn_ext_factor, params.yarn_attn_factor,
                              params.yarn_beta_fast, params.yarn_beta_slow, params.yarn_orig_ctx));
  // LongRoPE models (Phi-3) switch to their long rope factors when a sequence's context exceeds
  // the original one: the same file then gives other K for the same tokens.
  const std::string architecture = meta_string(model, "general.architecture");
  const int original_ctx = meta_int(model, architecture + ".rope.scaling.original_context_length",
                                    llama_model_n_ctx_train(model));
  add("rope_factors", llama_n_ctx_seq(ctx) > static_cast<uint32_t>(std::max(original_ctx, 0)) ? "long" : "short");
  // The file's RoPE settings (base, scaling, YaRN, dimensions) as the model states them.
  for (const auto& [key, value] : meta_with_prefix(model, architecture + ".rope.")) add(key, value);
  return out;
}

}  // namespace prefixd::engine::detail
