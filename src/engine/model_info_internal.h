// Internal to src/engine/: turns a loaded llama_model (and its context) into a ModelInfo.
#pragma once

#include <string>

#include <llama.h>

#include "engine/types.h"

namespace prefixd::engine::detail {

// Everything but the fingerprint and what the context decides.
ModelInfo describe_model(const llama_model* model, const std::string& path, const std::string& id_override);

// ModelInfo::runtime_signature of a context created from `model` with `params`.
std::string runtime_signature(const llama_model* model, const llama_context* ctx, const llama_context_params& params);

}  // namespace prefixd::engine::detail
