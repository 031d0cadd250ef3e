#include "modelgen/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "modelgen/rng.h"

namespace prefixd::modelgen {

namespace {

// About a megabyte of f32 per chunk: large enough that per-chunk overhead vanishes, small enough
// that a few chunks per thread in flight keep peak memory in the tens of megabytes.
constexpr std::int64_t kChunkElements = std::int64_t{1} << 18;

void fill(const Init& init, Rng& rng, std::vector<float>& values) {
  std::visit(
      [&](const auto& how) {
        using T = std::decay_t<decltype(how)>;
        if constexpr (std::is_same_v<T, Normal>) {
          for (auto& v : values) {
            v = how.stddev * rng.normal();
          }
        } else if constexpr (std::is_same_v<T, Uniform>) {
          for (auto& v : values) {
            v = how.low + (how.high - how.low) * rng.uniform();
          }
        } else if constexpr (std::is_same_v<T, Constant>) {
          std::ranges::fill(values, how.value);
        } else if constexpr (std::is_same_v<T, InverseSoftplusLogUniform>) {
          const float lo = std::log(how.dt_min);
          const float hi = std::log(how.dt_max);
          for (auto& v : values) {
            const float dt = std::exp(lo + (hi - lo) * rng.uniform());
            v = dt + std::log(-std::expm1(-dt));  // softplus(v) == dt
          }
        } else if constexpr (std::is_same_v<T, RowsOf>) {
          throw std::logic_error("internal error: RowsOf values are copied, not drawn");
        }
      },
      init);
}

// Rows [first_row, first_row + n_rows) of a RowsOf tensor: each is recomputed from the chunk of the
// source tensor that holds it, drawing that chunk's stream up to the row (the source's rows are
// as long as this tensor's, so its chunks hold the same number of rows).
void copy_rows(const RowsOf& how, std::int64_t n_per_row, std::uint64_t seed, std::int64_t first_row,
               std::int64_t n_rows, std::vector<float>& values) {
  const std::int64_t per_chunk = std::max<std::int64_t>(1, kChunkElements / n_per_row);
  if (first_row + n_rows > static_cast<std::int64_t>(how.rows.size())) {
    throw std::logic_error("internal error: RowsOf names fewer rows than the tensor has");
  }
  std::vector<float> drawn;
  for (std::int64_t i = 0; i < n_rows; ++i) {
    const std::int64_t row = how.rows[static_cast<std::size_t>(first_row + i)];
    Rng rng(stream_seed(seed, fnv1a(how.source), static_cast<std::uint64_t>(row / per_chunk)));
    drawn.resize(static_cast<std::size_t>((row % per_chunk + 1) * n_per_row));
    fill(how.source_init, rng, drawn);
    std::copy(drawn.end() - n_per_row, drawn.end(), values.begin() + i * n_per_row);
  }
}

}  // namespace

std::int64_t rows_per_chunk(const TensorSpec& tensor) {
  return std::max<std::int64_t>(1, kChunkElements / tensor.row_length());
}

std::int64_t chunk_count(const TensorSpec& tensor) {
  const std::int64_t rows = tensor.element_count() / tensor.row_length();
  const std::int64_t per_chunk = rows_per_chunk(tensor);
  return (rows + per_chunk - 1) / per_chunk;
}

void encode_chunk(const TensorSpec& tensor, ggml_type type, std::uint64_t seed, std::int64_t index,
                  std::vector<std::uint8_t>& out) {
  const std::int64_t n_per_row = tensor.row_length();
  const std::int64_t rows = tensor.element_count() / n_per_row;
  const std::int64_t first_row = index * rows_per_chunk(tensor);
  const std::int64_t n_rows = std::min(rows_per_chunk(tensor), rows - first_row);

  std::vector<float> values(static_cast<std::size_t>(n_rows * n_per_row));
  if (const auto* rows = std::get_if<RowsOf>(&tensor.init)) {
    copy_rows(*rows, n_per_row, seed, first_row, n_rows, values);
  } else {
    Rng rng(stream_seed(seed, fnv1a(tensor.name), static_cast<std::uint64_t>(index)));
    fill(tensor.init, rng, values);
  }

  out.resize(ggml_row_size(type, n_per_row) * static_cast<std::size_t>(n_rows));
  switch (type) {
    case GGML_TYPE_F32:
      std::memcpy(out.data(), values.data(), out.size());
      break;
    case GGML_TYPE_F16:
      ggml_fp32_to_fp16_row(values.data(), reinterpret_cast<ggml_fp16_t*>(out.data()),
                            static_cast<std::int64_t>(values.size()));
      break;
    default:
      // Reference (scalar) quantization: deterministic, and for Q8_0 it needs no importance matrix.
      ggml_quantize_chunk(type, values.data(), out.data(), 0, n_rows, n_per_row, nullptr);
      break;
  }
}

}  // namespace prefixd::modelgen
