// prefixd api — what happens to an embedding between the model and the wire: llama.cpp's
// normalizations (embd_normalize) and the base64 form of a vector.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace prefixd::api {

// `v` scaled by its norm of kind `norm`: -1 none (a copy), 0 so that the largest magnitude becomes
// 32760 (int16's range), 1 taxicab, 2 Euclidean, p > 2 the p-norm. A zero vector stays zero.
std::vector<float> normalized(std::span<const float> v, std::int32_t norm);

// The vector's float32 bytes (little-endian, as a client's numpy.frombuffer reads them), in base64.
std::string base64_floats(std::span<const float> v);

}  // namespace prefixd::api
