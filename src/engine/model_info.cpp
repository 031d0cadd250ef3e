// Reads model metadata from a loaded llama_model: family, shapes, K/V bytes per token.
#include <algorithm>
#include <cstdio>
#include <filesystem>
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

int meta_int(const llama_model* model, const std::string& key, int fallback) {
  const std::string text = meta_string(model, key);
  if (text.empty()) return fallback;
  try {
    return std::stoi(text);
  } catch (const std::exception&) {
    return fallback;
  }
}

// FNV-1a over the shapes and size: a cheap identity for the weights that is stable across runs.
std::string fingerprint_of(const ModelInfo& info) {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (char c : info.architecture) mix(static_cast<unsigned char>(c));
  for (std::uint64_t v : {std::uint64_t(info.n_embd), std::uint64_t(info.n_layer), std::uint64_t(info.n_head),
                          std::uint64_t(info.n_head_kv), std::uint64_t(info.n_vocab), info.n_params, info.model_bytes}) {
    mix(v);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
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
  info.fingerprint = fingerprint_of(info);
  return info;
}

}  // namespace prefixd::engine::detail
