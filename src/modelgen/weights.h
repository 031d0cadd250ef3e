// Deterministic weight values, produced and encoded one chunk of rows at a time.
//
// A tensor is cut into chunks of whole rows whose size depends only on the tensor's shape; each
// chunk draws from its own random stream, seeded by (seed, tensor name, chunk index). Chunks can
// therefore be generated in any order, on any number of threads, and the bytes never change.
#pragma once

#include <ggml.h>

#include <cstdint>
#include <vector>

#include "modelgen/spec.h"

namespace prefixd::modelgen {

std::int64_t rows_per_chunk(const TensorSpec& tensor);
std::int64_t chunk_count(const TensorSpec& tensor);

// The tensor's values for chunk `index`, encoded as `type` (f32, f16 or a quantized type whose
// block size divides the row length); `out` is resized to exactly the encoded size.
void encode_chunk(const TensorSpec& tensor, ggml_type type, std::uint64_t seed, std::int64_t index,
                  std::vector<std::uint8_t>& out);

}  // namespace prefixd::modelgen
