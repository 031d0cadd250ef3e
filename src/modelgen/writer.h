// Turns a ModelSpec plus its vocabulary into a GGUF file that libllama loads like any converted
// model.
#pragma once

#include <ggml.h>

#include <cstdint>
#include <filesystem>

#include "modelgen/spec.h"
#include "modelgen/vocab.h"

namespace prefixd::modelgen {

struct WriteResult {
  std::uint64_t bytes = 0;       // file size
  std::uint64_t parameters = 0;  // total element count of all tensors
};

// The type a tensor is stored in: linear weights take `matrix_type` when its block size divides
// the row length (otherwise f32); everything else is f32.
ggml_type storage_type(const TensorSpec& tensor, ggml_type matrix_type);

// Writes the whole file at `path` (truncating it). Tensor data is generated and written chunk by
// chunk, so peak memory is a few megabytes per thread plus the metadata, whatever the model size.
// Throws std::runtime_error on any I/O failure; the caller owns making the write atomic.
WriteResult write_gguf(const ModelSpec& spec, const Vocabulary& vocab, ggml_type matrix_type, std::uint64_t seed,
                       const std::filesystem::path& path);

}  // namespace prefixd::modelgen
