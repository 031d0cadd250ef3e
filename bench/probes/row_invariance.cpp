// Whether a row's result depends on how many rows its call holds, on the installed ggml's kernels:
// flash attention (one query row against a KV buffer in which every third cell is masked, as other
// sequences' cells are) and a matrix product with F16 weights, for calls of 1 to 512 rows, the
// first row the same in every call. The scheduler computes each sampled row in a call of 2 to
// Engine::rowwise_rows() rows (63) because ggml-cpu gives such rows identical results
// (docs/design.md, "Exactness"); `--check` exits 1 when that no longer holds.
//
// prefixd_row_probe [--gpu] [--check]: the CPU backend, or the first GPU backend ggml loads.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml.h>

namespace {

struct ContextFree {
  void operator()(ggml_context* ctx) const { ggml_free(ctx); }
};
struct BufferFree {
  void operator()(ggml_backend_buffer* buffer) const { ggml_backend_buffer_free(buffer); }
};
struct BackendFree {
  void operator()(ggml_backend* backend) const { ggml_backend_free(backend); }
};
using ContextPtr = std::unique_ptr<ggml_context, ContextFree>;
using BufferPtr = std::unique_ptr<ggml_backend_buffer, BufferFree>;
using BackendPtr = std::unique_ptr<ggml_backend, BackendFree>;

constexpr int kHeadDim = 128;
constexpr int kHeads = 4;
constexpr int kRows[] = {1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 65, 127, 128, 255, 256, 512};

ContextPtr graph_context() {
  const ggml_init_params params = {ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true};
  return ContextPtr(ggml_init(params));
}

std::vector<ggml_fp16_t> half_noise(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> noise(0, 1);
  std::vector<ggml_fp16_t> out(n);
  for (auto& x : out) x = ggml_fp32_to_fp16(noise(rng) * scale);
  return out;
}

// Row 0 of a flash-attention call of `rows` query rows (the others random).
std::vector<float> attention_row(ggml_backend_t backend, int rows, const std::vector<float>& first, std::mt19937& rng,
                                 const std::vector<ggml_fp16_t>& k_data, const std::vector<ggml_fp16_t>& v_data, int cells) {
  ContextPtr ctx = graph_context();
  ggml_tensor* q = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, kHeadDim, rows, kHeads, 1);
  ggml_tensor* k = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F16, kHeadDim, cells, kHeads, 1);
  ggml_tensor* v = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F16, kHeadDim, cells, kHeads, 1);
  ggml_tensor* mask = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F16, cells, rows, 1, 1);
  ggml_tensor* out = ggml_flash_attn_ext(ctx.get(), q, k, v, mask, 1.0f / std::sqrt(static_cast<float>(kHeadDim)), 0.0f, 0.0f);
  ggml_prec_set_acc(out, GGML_PREC_F32);  // as libllama asks for attention
  ggml_cgraph* graph = ggml_new_graph(ctx.get());
  ggml_build_forward_expand(graph, out);
  BufferPtr buffer(ggml_backend_alloc_ctx_tensors(ctx.get(), backend));
  std::normal_distribution<float> noise(0, 1);
  std::vector<float> q_data(static_cast<size_t>(kHeadDim) * rows * kHeads);
  for (int h = 0; h < kHeads; ++h) {
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < kHeadDim; ++i) {
        q_data[(static_cast<size_t>(h) * rows + r) * kHeadDim + i] = r == 0 ? first[static_cast<size_t>(h) * kHeadDim + i] : noise(rng);
      }
    }
  }
  std::vector<ggml_fp16_t> mask_data(static_cast<size_t>(cells) * rows);
  for (size_t i = 0; i < mask_data.size(); ++i) mask_data[i] = ggml_fp32_to_fp16(i % 3 == 2 ? -INFINITY : 0.0f);
  ggml_backend_tensor_set(q, q_data.data(), 0, q_data.size() * sizeof(float));
  ggml_backend_tensor_set(k, k_data.data(), 0, k_data.size() * sizeof(ggml_fp16_t));
  ggml_backend_tensor_set(v, v_data.data(), 0, v_data.size() * sizeof(ggml_fp16_t));
  ggml_backend_tensor_set(mask, mask_data.data(), 0, mask_data.size() * sizeof(ggml_fp16_t));
  ggml_backend_graph_compute(backend, graph);
  std::vector<float> row(static_cast<size_t>(kHeadDim) * kHeads);  // the result is [dim, heads, rows]
  ggml_backend_tensor_get(out, row.data(), 0, row.size() * sizeof(float));
  return row;
}

// Column 0 of W·X for an X of `columns` columns (the others random).
std::vector<float> product_column(ggml_backend_t backend, int columns, const std::vector<float>& first, std::mt19937& rng,
                                  const std::vector<ggml_fp16_t>& w_data, int inner, int outer) {
  ContextPtr ctx = graph_context();
  ggml_tensor* w = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F16, inner, outer);
  ggml_tensor* x = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, inner, columns);
  ggml_tensor* y = ggml_mul_mat(ctx.get(), w, x);
  ggml_cgraph* graph = ggml_new_graph(ctx.get());
  ggml_build_forward_expand(graph, y);
  BufferPtr buffer(ggml_backend_alloc_ctx_tensors(ctx.get(), backend));
  std::normal_distribution<float> noise(0, 1);
  std::vector<float> x_data(static_cast<size_t>(inner) * columns);
  for (int c = 0; c < columns; ++c) {
    for (int i = 0; i < inner; ++i) x_data[static_cast<size_t>(c) * inner + i] = c == 0 ? first[static_cast<size_t>(i)] : noise(rng);
  }
  ggml_backend_tensor_set(w, w_data.data(), 0, w_data.size() * sizeof(ggml_fp16_t));
  ggml_backend_tensor_set(x, x_data.data(), 0, x_data.size() * sizeof(float));
  ggml_backend_graph_compute(backend, graph);
  std::vector<float> column(static_cast<size_t>(outer));
  ggml_backend_tensor_get(y, column.data(), 0, column.size() * sizeof(float));
  return column;
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) most = std::fmax(most, std::fabs(static_cast<double>(a[i]) - b[i]));
  return most;
}

// Prints each call size's difference from the 2-row call, and from the largest call (which shows
// the sizes a backend computes alike when its small calls take other kernels, as GPU backends'
// do); true when every call of 2 to 63 rows gave the 2-row call's result exactly.
bool report(const char* what, const std::vector<std::vector<float>>& results) {
  std::printf("%s: row 0's max |difference| from the 2-row call, and from the %d-row call\n", what,
              kRows[std::size(kRows) - 1]);
  bool rowwise_identical = true;
  for (size_t i = 0; i < results.size(); ++i) {
    const double d = max_difference(results[i], results[1]);
    const double big = max_difference(results[i], results.back());
    std::printf("  %3d rows: %-10.3g%-11s %-10.3g%s\n", kRows[i], d, d == 0 ? " identical" : "", big,
                big == 0 ? " identical" : "");
    if (kRows[i] >= 2 && kRows[i] <= 63 && d != 0) rowwise_identical = false;
  }
  return rowwise_identical;
}

}  // namespace

int main(int argc, char** argv) {
  bool gpu = false;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--gpu") {
      gpu = true;
    } else if (arg == "--check") {
      check = true;
    } else {
      std::fprintf(stderr, "prefixd_row_probe: unknown argument '%s' (--gpu, --check)\n", argv[i]);
      return 2;
    }
  }
  ggml_backend_load_all();
  BackendPtr backend(ggml_backend_init_by_type(gpu ? GGML_BACKEND_DEVICE_TYPE_GPU : GGML_BACKEND_DEVICE_TYPE_CPU, nullptr));
  if (!backend) {
    std::fprintf(stderr, "prefixd_row_probe: no %s backend\n", gpu ? "GPU" : "CPU");
    return 2;
  }
  std::printf("backend: %s\n", ggml_backend_name(backend.get()));
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0, 1);
  bool identical = true;
  for (const int cells : {700, 4096}) {
    const auto k_data = half_noise(rng, static_cast<size_t>(kHeadDim) * cells * kHeads, 1.0f);
    const auto v_data = half_noise(rng, static_cast<size_t>(kHeadDim) * cells * kHeads, 1.0f);
    std::vector<float> first(static_cast<size_t>(kHeadDim) * kHeads);
    for (auto& x : first) x = noise(rng);
    std::vector<std::vector<float>> rows;
    for (const int n : kRows) rows.push_back(attention_row(backend.get(), n, first, rng, k_data, v_data, cells));
    char what[64];
    std::snprintf(what, sizeof what, "flash attention over %d cells", cells);
    identical = report(what, rows) && identical;
  }
  constexpr int kInner = 896;
  constexpr int kOuter = 512;
  const auto w_data = half_noise(rng, static_cast<size_t>(kInner) * kOuter, 0.05f);
  std::vector<float> first(kInner);
  for (auto& x : first) x = noise(rng);
  std::vector<std::vector<float>> columns;
  for (const int n : kRows) columns.push_back(product_column(backend.get(), n, first, rng, w_data, kInner, kOuter));
  identical = report("matrix product, F16 weights 512 x 896", columns) && identical;
  std::printf("calls of 2 to 63 rows: %s\n", identical ? "every row identical" : "a row differs");
  return check && !identical ? 1 : 0;
}
