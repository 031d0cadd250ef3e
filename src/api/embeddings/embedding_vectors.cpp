#include "api/embeddings/embedding_vectors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string_view>

#include "api/images/image_input.h"

namespace prefixd::api {

std::vector<float> normalized(std::span<const float> v, std::int32_t norm) {
  double scale = 1;  // the divisor
  switch (norm) {
    case -1: break;
    case 0: {
      double largest = 0;
      for (const float x : v) largest = std::max(largest, std::abs(static_cast<double>(x)));
      scale = largest / 32760.0;
      break;
    }
    case 2: {
      double sum = 0;
      for (const float x : v) sum += static_cast<double>(x) * x;
      scale = std::sqrt(sum);
      break;
    }
    default: {
      double sum = 0;
      for (const float x : v) sum += std::pow(std::abs(static_cast<double>(x)), norm);
      scale = std::pow(sum, 1.0 / norm);
      break;
    }
  }
  const double factor = scale > 0 ? 1.0 / scale : 0.0;
  std::vector<float> out(v.size());
  std::ranges::transform(v, out.begin(), [factor](float x) { return static_cast<float>(x * factor); });
  return out;
}

std::string base64_floats(std::span<const float> v) {
  static_assert(std::endian::native == std::endian::little, "the base64 form is float32 little-endian");
  std::string bytes(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return encode_base64(bytes);
}

}  // namespace prefixd::api
