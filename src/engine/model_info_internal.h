// Internal to src/engine/: turns a loaded llama_model into a ModelInfo.
#pragma once

#include <string>

#include <llama.h>

#include "engine/types.h"

namespace prefixd::engine::detail {

ModelInfo describe_model(const llama_model* model, const std::string& path, const std::string& id_override);

}  // namespace prefixd::engine::detail
