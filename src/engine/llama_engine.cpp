// The Engine implementation over libllama: one model, one context with a unified KV cache.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <format>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include <llama.h>
#include <spdlog/spdlog.h>

#include "engine/call_rows.h"
#include "engine/engine.h"
#include "engine/llama_handles.h"
#include "engine/llama_sampler.h"
#include "engine/llama_vocabulary.h"
#include "engine/model_fingerprint.h"
#include "engine/model_info_internal.h"
#include "engine/mtmd_vision.h"
#include "engine/rope_layout.h"
#include "engine/window_states.h"

namespace prefixd::engine {
namespace detail {

namespace {
// The capture of this thread (a stack through outer_): per thread, so that a grammar checked on an
// HTTP worker never collects lines another thread logs.
thread_local LlamaErrorCapture* active_capture = nullptr;

void route_llama_log(ggml_log_level level, const char* text, void* /*user_data*/) {
  std::string_view line(text);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.empty()) return;
  if (active_capture != nullptr && (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN)) {
    active_capture->add(line);
    spdlog::debug("llama: {}", line);
    return;
  }
  switch (level) {
    case GGML_LOG_LEVEL_ERROR: spdlog::error("llama: {}", line); break;
    case GGML_LOG_LEVEL_WARN: spdlog::warn("llama: {}", line); break;
    default: spdlog::trace("llama: {}", line); break;
  }
}
}  // namespace

LlamaErrorCapture::LlamaErrorCapture() : outer_(active_capture) { active_capture = this; }
LlamaErrorCapture::~LlamaErrorCapture() { active_capture = outer_; }
LlamaErrorCapture* LlamaErrorCapture::active() { return active_capture; }
void LlamaErrorCapture::add(std::string_view line) {
  if (!text_.empty()) text_ += "; ";
  text_ += line;
}

void ensure_backend_initialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(route_llama_log, nullptr);
    llama_backend_init();
  });
}

bool is_gpu(ggml_backend_dev_t device) {
  const auto type = ggml_backend_dev_type(device);
  return type == GGML_BACKEND_DEVICE_TYPE_GPU || type == GGML_BACKEND_DEVICE_TYPE_IGPU;
}

bool has_gpu_device() {
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    if (is_gpu(ggml_backend_dev_get(i))) return true;
  }
  return false;
}

// libllama puts the last `gpu_layers` of the model's layers on the GPU devices (split among them),
// counting the output layer after the repeating ones, and keeps each offloaded repeating layer's
// K/V beside it (offload_kqv, on by default). A software device such as Mesa's lavapipe is a GPU
// device only when the Vulkan backend is told to use it (GGML_VK_VISIBLE_DEVICES).
ModelInfo::Placement describe_placement(int gpu_layers, const ModelInfo& info, std::uint32_t n_ctx) {
  ModelInfo::Placement placement;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t device = ggml_backend_dev_get(i);
    if (!is_gpu(device)) continue;
    size_t free = 0;
    size_t total = 0;
    ggml_backend_dev_memory(device, &free, &total);
    placement.devices.push_back(std::format("{} ({}: {}, {} MiB, {} MiB free)", ggml_backend_dev_name(device),
                                            ggml_backend_reg_name(ggml_backend_dev_backend_reg(device)),
                                            ggml_backend_dev_description(device), total >> 20, free >> 20));
    placement.device_memory_bytes += total;
  }
  if (placement.devices.empty() || gpu_layers <= 0) return placement;
  placement.layers_offloaded = std::min(gpu_layers, info.n_layer);
  placement.output_offloaded = gpu_layers > info.n_layer;
  if (info.n_layer > 0) {
    placement.kv_device_bytes = info.kv_bytes_per_token * n_ctx * static_cast<std::uint64_t>(placement.layers_offloaded) /
                                static_cast<std::uint64_t>(info.n_layer);
  }
  return placement;
}

// The startup line that says where the model runs.
void log_placement(const ModelInfo& info, int gpu_layers) {
  const ModelInfo::Placement& p = info.placement;
  if (p.devices.empty()) {
    if (gpu_layers > 0) {
      spdlog::warn("compute: CPU; --gpu-layers {} has no GPU device to go to (the installed ggml has no GPU backend, "
                   "or its devices are hidden)",
                   gpu_layers);
    } else {
      spdlog::info("compute: CPU (no GPU device)");
    }
    return;
  }
  std::string devices;
  for (const std::string& d : p.devices) devices += (devices.empty() ? "" : "; ") + d;
  if (p.layers_offloaded == 0 && !p.output_offloaded) {
    spdlog::info("compute: CPU, K/V in host memory; GPU devices unused (--gpu-layers 0): {}", devices);
    return;
  }
  spdlog::info("compute: {} of {} layers{} on {}; K/V of {} layers in device memory ({:.0f} MiB), {} in host memory",
               p.layers_offloaded, info.n_layer, p.output_offloaded ? " and the output layer" : "", devices,
               p.layers_offloaded, static_cast<double>(p.kv_device_bytes) / (1 << 20), info.n_layer - p.layers_offloaded);
}

}  // namespace detail

namespace {

using detail::AdapterPtr;
using detail::ContextPtr;
using detail::ModelPtr;
using detail::WindowStates;

// libllama's CPU kernels (ggml-cpu) choose their path by the rows of a call. One row takes the
// matrix-vector products (tinyBLAS serves only two rows or more) and, over 512 cells or more,
// flash attention split across the threads by cells, whose partial sums depend on how many cells
// are in use; 64 rows or more (GGML_FA_TILE_Q) take the tiled flash-attention kernel, which sums
// the cells in tiles of their index in the KV buffer. From 2 to 63 rows every row takes the same
// kernels and is summed over its own cells one by one, in cell order.
constexpr std::int32_t kRowwiseRows = 63;

// Whether the text model rotates by M-RoPE's several position components (Qwen2-VL and later).
// The model's rerank prompt (tokenizer.chat_template.rerank), empty when it has none.
std::string rerank_template(const llama_model* model) {
  const char* text = llama_model_chat_template(model, "rerank");
  return text == nullptr ? std::string() : std::string(text);
}

enum llama_pooling_type llama_pooling_of(Pooling pooling) {
  switch (pooling) {
    case Pooling::model: return LLAMA_POOLING_TYPE_UNSPECIFIED;
    case Pooling::none: return LLAMA_POOLING_TYPE_NONE;
    case Pooling::mean: return LLAMA_POOLING_TYPE_MEAN;
    case Pooling::cls: return LLAMA_POOLING_TYPE_CLS;
    case Pooling::last: return LLAMA_POOLING_TYPE_LAST;
    case Pooling::rank: return LLAMA_POOLING_TYPE_RANK;
  }
  return LLAMA_POOLING_TYPE_UNSPECIFIED;
}

Pooling pooling_of(enum llama_pooling_type type) {
  switch (type) {
    case LLAMA_POOLING_TYPE_MEAN: return Pooling::mean;
    case LLAMA_POOLING_TYPE_CLS: return Pooling::cls;
    case LLAMA_POOLING_TYPE_LAST: return Pooling::last;
    case LLAMA_POOLING_TYPE_RANK: return Pooling::rank;
    default: return Pooling::none;
  }
}

bool uses_mrope(const llama_model* model) {
  const llama_rope_type rope = llama_model_rope_type(model);
  return rope == LLAMA_ROPE_TYPE_MROPE || rope == LLAMA_ROPE_TYPE_IMROPE;
}

class LlamaEngine final : public Engine {
 public:
  LlamaEngine(ModelPtr model, std::vector<AdapterPtr> adapters, ContextPtr ctx, ModelInfo info,
              std::unique_ptr<Vision> vision, SeqId pad_seq, SeqId guard_seq, bool deterministic,
              std::int32_t stream_cells, detail::CallPadding padding, std::int32_t id_stride)
      : model_(std::move(model)),
        adapters_(std::move(adapters)),
        ctx_(std::move(ctx)),
        info_(std::move(info)),
        vocab_(llama_model_get_vocab(model_.get()), rerank_template(model_.get())),
        batch_(static_cast<int>(std::max<std::uint32_t>(llama_n_batch(ctx_.get()), 2))),
        vision_(std::move(vision)),
        pad_seq_(pad_seq),
        reserved_(static_cast<std::int32_t>(pad_seq >= 0) + static_cast<std::int32_t>(guard_seq >= 0)),
        deterministic_(deterministic),
        stream_cells_(stream_cells),
        padding_(padding),
        id_stride_(id_stride),
        mrope_(uses_mrope(model_.get())),
        last_by_row_(info_.embeddings && info_.pooling == Pooling::last &&
                     llama_pooling_type(ctx_.get()) == LLAMA_POOLING_TYPE_NONE),
        layouts_(mrope_ ? llama_n_seq_max(ctx_.get()) : 0),
        logits_(*this) {
    if (guard_seq >= 0 && pad_seq >= 0) {
      window_states_.emplace(ctx_.get(), pad_seq, guard_seq, info_.sliding_window);
    }
    // Every sequence is empty now: sequence 0's partial state is the empty one.
    empty_checkpoint_ = raw_checkpoint(0);
    if (info_.family == ModelFamily::sliding_window && !memory_is_trimmable(info_)) window_drop_ = one_window_cell_state();
  }

  const ModelInfo& model() const override { return info_; }
  const Vocabulary& vocab() const override { return vocab_; }
  // The cells one sequence can hold: the whole pool, or its own stream's (less the cell a padded
  // row of its own takes, rowwise_streams()).
  std::int32_t context_size() const override {
    return stream_cells_ > 0 ? stream_cells_ : static_cast<std::int32_t>(llama_n_ctx_seq(ctx_.get()));
  }
  std::int32_t batch_size() const override { return static_cast<std::int32_t>(llama_n_batch(ctx_.get())); }
  // Padded calls (a GPU): every row of a call padded by padding_ is computed alike, up to the
  // largest multiple of its rule's within a batch.
  std::int32_t rowwise_rows() const override {
    return padded() ? batch_size() / padding_.multiple * padding_.multiple : kRowwiseRows;
  }
  bool padded() const { return padding_.least > 0; }
  // Pooled embeddings read every row of a call: libllama outputs them all (and warns when a batch
  // does not say so).
  bool pooled_outputs() const {
    return info_.embeddings && llama_pooling_type(ctx_.get()) != LLAMA_POOLING_TYPE_NONE;
  }
  bool deterministic() const override { return deterministic_; }
  std::int32_t sequence_count() const override {
    return static_cast<std::int32_t>(llama_n_seq_max(ctx_.get())) / id_stride_ - reserved_;
  }

  void use_adapters(std::span<const AdapterScale> adapters) override {
    if (std::ranges::equal(adapters, applied_)) return;
    std::vector<llama_adapter_lora*> handles;
    std::vector<float> scales;
    for (const AdapterScale& a : adapters) {
      if (a.id < 0 || static_cast<std::size_t>(a.id) >= adapters_.size()) {
        throw std::invalid_argument(std::format("no LoRA adapter has id {} ({} loaded)", a.id, adapters_.size()));
      }
      if (a.scale == 0.0f || std::ranges::find(handles, adapters_[static_cast<std::size_t>(a.id)].get()) != handles.end()) {
        throw std::invalid_argument(std::format("LoRA adapter {}: listed twice or at scale 0", a.id));
      }
      handles.push_back(adapters_[static_cast<std::size_t>(a.id)].get());
      scales.push_back(a.scale);
    }
    if (llama_set_adapters_lora(ctx_.get(), handles.data(), handles.size(), scales.data()) != 0) {
      throw std::runtime_error("libllama refused the LoRA adapters");
    }
    applied_.assign(adapters.begin(), adapters.end());
  }

  DecodeStatus decode(std::span<const BatchToken> tokens) override { return run_batch(tokens, deterministic_); }
  DecodeStatus decode_padded(std::span<const BatchToken> tokens) override { return run_batch(tokens, true); }

  DecodeStatus run_batch(std::span<const BatchToken> tokens, bool pad_lone_row) {
    if (tokens.empty()) return DecodeStatus::ok;
    if (static_cast<int>(tokens.size()) > batch_size()) return DecodeStatus::error;
    logits_copied_ = false;
    if (rowwise_streams()) return run_rowwise_streams(tokens);
    llama_batch& batch = batch_.get();
    batch.n_tokens = static_cast<int32_t>(tokens.size());
    const bool every_row = pooled_outputs();
    for (size_t i = 0; i < tokens.size(); ++i) {
      batch.token[i] = tokens[i].token;
      batch.pos[i] = rope_pos(id(tokens[i].seq), tokens[i].pos);
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = id(tokens[i].seq);
      batch.logits[i] = tokens[i].logits || every_row ? 1 : 0;
    }
    // A lone row gets a second one, of the pad sequence, so that it takes the kernels of a
    // row-wise call (kRowwiseRows). The pad row comes last and its cell is freed at once.
    const bool padded = pad_lone_row && tokens.size() == 1 && pad_seq_ >= 0;
    if (padded) {
      batch.token[1] = tokens[0].token;
      batch.pos[1] = 0;
      batch.n_seq_id[1] = 1;
      batch.seq_id[1][0] = pad_seq_;
      batch.logits[1] = every_row ? 1 : 0;
      batch.n_tokens = 2;
    }
    // Last pooling (last_by_row_): embeddings on only for a call with rows that are read.
    if (last_by_row_) {
      const bool read = std::ranges::any_of(tokens, [](const BatchToken& t) { return t.logits; });
      if (read != embeddings_on_) llama_set_embeddings(ctx_.get(), read);
      embeddings_on_ = read;
    }
    const int32_t rc = llama_decode(ctx_.get(), batch);
    if (padded && memory() != nullptr) llama_memory_seq_rm(memory(), pad_seq_, -1, -1);
    return status_of(rc);
  }

  static DecodeStatus status_of(int32_t rc) {
    switch (rc) {
      case 0: return DecodeStatus::ok;
      case 1: return DecodeStatus::no_kv_space;
      case 2: return DecodeStatus::aborted;
      default: return DecodeStatus::error;
    }
  }

  // Deterministic, with a stream per sequence. libllama computes a call over several streams in
  // micro-batches of consecutive sequence ids, each taking as many rows from every sequence as the
  // one with the fewest has left. So the rows go in one libllama call per count of rows a sequence
  // has (one micro-batch a call), and rows at a sequence's next positions pad it where its count
  // would take other kernels; their cells are freed after the call.
  // - On the CPU (not padded()), calls of at most kRowwiseRows rows. ggml-cpu's flash attention
  //   splits the cells between the threads (summing otherwise than a row-wise call) for a
  //   micro-batch of one stream and one row, so a sequence with one row that no neighbouring id
  //   joins gets a second row (a pad row in another sequence's stream would be a micro-batch of
  //   its own).
  // - Padded (a GPU), every sequence gets rows up to the count padding_ gives it, with which every
  //   row is computed alike (measure_call_rows), and a call holds up to rowwise_rows().
  //   Sequences padded to one count share a call.
  // Every row of every call is then computed alike, in a stream that holds its sequence's cells
  // alone from cell 0 in position order. The rows' logits are copied out after each call
  // (logits_copied_). REQUIRES: a sequence has at most rowwise_rows() rows (the scheduler's
  // calls) and the batch holds two rows.
  bool rowwise_streams() const { return deterministic_ && !info_.cells_shared; }

  DecodeStatus run_rowwise_streams(std::span<const BatchToken> tokens) {
    std::map<SeqId, std::vector<std::size_t>> rows_of;  // by sequence id: consecutive ids stay together
    for (std::size_t i = 0; i < tokens.size(); ++i) rows_of[tokens[i].seq].push_back(i);
    // Rows each sequence takes in its call, pads included when padding_ sets their count.
    const auto call_rows = [&](std::size_t count) {
      return padded() ? static_cast<std::size_t>(padding_.rows_for(static_cast<std::int32_t>(count))) : count;
    };
    std::map<std::size_t, std::vector<SeqId>> by_count;  // each list in id order
    for (const auto& [seq, rows] : rows_of) by_count[call_rows(rows.size())].push_back(seq);
    const auto n_vocab = static_cast<std::size_t>(info_.n_vocab);
    copied_rows_.assign(tokens.size(), -1);
    copied_logits_.clear();
    std::vector<SeqId> done;  // sequences whose rows earlier calls wrote
    const auto undo = [&](std::span<const SeqId> seqs) {
      for (const SeqId seq : seqs) seq_rm(id(seq), tokens[rows_of[seq].front()].pos, -1);
    };
    llama_batch& batch = batch_.get();
    // At most one micro-batch a call (n_ubatch is the batch size): libllama would split a larger
    // one by taking fewer rows from every sequence.
    const auto most_rows = static_cast<std::size_t>(padded() ? rowwise_rows() : std::min(kRowwiseRows, batch_size()));
    for (const auto& [count, seqs] : by_count) {
      const std::size_t per_call = std::max<std::size_t>(1, most_rows / std::max<std::size_t>(count, 2));
      for (std::size_t first = 0; first < seqs.size(); first += per_call) {
        const std::span<const SeqId> call = std::span(seqs).subspan(first, std::min(per_call, seqs.size() - first));
        batch.n_tokens = 0;
        std::vector<std::pair<std::size_t, int32_t>> outputs;  // (row of `tokens`, row of the call)
        std::vector<std::pair<llama_seq_id, Pos>> pads;         // (libllama's sequence, first padded position)
        const auto add = [&](const BatchToken& t, llama_seq_id seq, bool logits) {
          const int32_t k = batch.n_tokens++;
          batch.token[k] = t.token;
          batch.pos[k] = rope_pos(seq, t.pos);
          batch.n_seq_id[k] = 1;
          batch.seq_id[k][0] = seq;
          batch.logits[k] = logits ? 1 : 0;
          return k;
        };
        for (std::size_t j = 0; j < call.size(); ++j) {
          const SeqId seq = call[j];
          const std::vector<std::size_t>& rows = rows_of[seq];
          Pos next = 0;
          for (const std::size_t i : rows) {
            const int32_t k = add(tokens[i], id(seq), tokens[i].logits);
            if (tokens[i].logits) outputs.emplace_back(i, k);
            next = std::max(next, tokens[i].pos + 1);
          }
          const BatchToken& last = tokens[rows.back()];
          if (id_stride_ > 1) {
            // A recurrent state cannot lose a row: a lone row's second goes into the empty stream
            // that follows its own (libllama batches consecutive ids alone), at position 0.
            if (rows.size() == 1) {
              add(BatchToken{.token = last.token, .pos = 0}, id(seq) + 1, false);
              pads.emplace_back(id(seq) + 1, -1);
            }
            continue;
          }
          const bool joined = (j > 0 && call[j - 1] == seq - 1) || (j + 1 < call.size() && call[j + 1] == seq + 1);
          std::size_t pad = count - rows.size();
          if (!padded() && rows.size() == 1 && !joined) pad = 1;
          if (pad == 0) continue;
          for (std::size_t p = 0; p < pad; ++p) add(BatchToken{.token = last.token, .pos = next + static_cast<Pos>(p)}, id(seq), false);
          pads.emplace_back(id(seq), next);
        }
        const int32_t rc = llama_decode(ctx_.get(), batch);
        for (const auto& [seq, pos] : pads) seq_rm(seq, pos, -1);
        if (rc != 0) {
          undo(done);  // libllama undid this call's rows itself
          return status_of(rc);
        }
        for (const auto& [i, k] : outputs) {
          const float* row = llama_get_logits_ith(ctx_.get(), k);
          if (row == nullptr) continue;
          copied_rows_[i] = static_cast<std::int32_t>(copied_logits_.size() / n_vocab);
          copied_logits_.insert(copied_logits_.end(), row, row + n_vocab);
        }
        done.insert(done.end(), call.begin(), call.end());
      }
    }
    logits_copied_ = true;
    return DecodeStatus::ok;
  }

  Vision* vision() const override { return vision_.get(); }

  DecodeStatus decode_embeddings(std::span<const float> embeddings, std::int32_t rows, Pos pos, SeqId seq,
                                 const PreparedImage& media, Pos begin) override {
    const auto width = static_cast<size_t>(llama_model_n_embd_inp(model_.get()));
    const Pos offset = pos - begin;
    if (rows <= 0 || rows > batch_.capacity() || embeddings.size() != static_cast<size_t>(rows) * width || offset < 0 ||
        offset + rows > media.n_tokens) {
      return DecodeStatus::error;
    }
    if (!embedding_batch_) embedding_batch_ = std::make_unique<detail::OwnedBatch>(batch_.capacity(), static_cast<int>(width));
    llama_batch batch = embedding_batch_->get();
    batch.n_tokens = rows;
    std::memcpy(batch.embd, embeddings.data(), embeddings.size() * sizeof(float));
    for (std::int32_t i = 0; i < rows; ++i) {
      batch.pos[i] = pos + i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = id(seq);
      batch.logits[i] = 0;
    }
    // M-RoPE: four positions a row, section-major (t, row, column, a fourth). An image's rows share
    // the t of its first token, each at its grid place, the fourth 0; a clip's rows take one
    // position each, in all four sections as a text token's (libmtmd places both so).
    std::optional<detail::RopeImage> placed;
    if (mrope_) {
      const Pos t0 = layouts_[static_cast<size_t>(id(seq))].t_of(begin);
      const bool grid = !media.grid.empty();
      if (grid && media.grid.size() != static_cast<size_t>(media.n_tokens)) return DecodeStatus::error;
      rope_positions_.assign(static_cast<size_t>(rows) * 4, 0);
      for (std::int32_t i = 0; i < rows; ++i) {
        const auto r = static_cast<size_t>(i);
        const auto n = static_cast<size_t>(rows);
        const Pos t = grid ? t0 : t0 + offset + i;
        const PreparedImage::GridPlace place = grid ? media.grid[static_cast<size_t>(offset + i)] : PreparedImage::GridPlace{};
        rope_positions_[r] = t;
        rope_positions_[n + r] = t + place.row;
        rope_positions_[2 * n + r] = t + place.column;
        rope_positions_[3 * n + r] = grid ? 0 : t;
      }
      batch.pos = rope_positions_.data();
      if (grid) placed = detail::RopeImage{begin, media.n_tokens, media.n_pos, offset + rows};
    }
    if (media.non_causal) llama_set_causal_attn(ctx_.get(), false);
    const int32_t rc = llama_decode(ctx_.get(), batch);
    if (media.non_causal) llama_set_causal_attn(ctx_.get(), true);
    if (rc == 0 && placed) layouts_[static_cast<size_t>(id(seq))].place(*placed);
    return status_of(rc);
  }

  std::span<const float> logits(std::int32_t row) const override {
    const float* data = row_logits(row);
    if (data == nullptr) return {};
    return {data, static_cast<size_t>(info_.n_vocab)};
  }

  std::span<const float> embedding(SeqId seq, std::int32_t row) const override {
    if (!info_.embeddings || info_.embedding_width <= 0) return {};
    if (last_by_row_ && !embeddings_on_) return {};
    const float* data = pooled_outputs() ? llama_get_embeddings_seq(ctx_.get(), id(seq))
                                         : llama_get_embeddings_ith(ctx_.get(), row);
    if (data == nullptr) return {};
    return {data, static_cast<size_t>(info_.embedding_width)};
  }

  const float* row_logits(std::int32_t row) const {
    if (!logits_copied_) return llama_get_logits_ith(ctx_.get(), row);
    if (row < 0 || static_cast<std::size_t>(row) >= copied_rows_.size() || copied_rows_[static_cast<std::size_t>(row)] < 0) {
      return nullptr;
    }
    return copied_logits_.data() + static_cast<std::size_t>(copied_rows_[static_cast<std::size_t>(row)]) *
                                       static_cast<std::size_t>(info_.n_vocab);
  }

  std::unique_ptr<Sampler> make_sampler(const SamplingParams& params) override {
    return detail::make_llama_sampler(ctx_.get(), llama_model_get_vocab(model_.get()), logits_, params);
  }

  std::optional<std::string> check_grammar(const Grammar& grammar) const override {
    return detail::check_llama_grammar(llama_model_get_vocab(model_.get()), grammar);
  }

  void copy_sequence(SeqId src, SeqId dst, Pos p0, Pos p1) override {
    if (memory() == nullptr) return;  // nothing is kept between calls (ModelInfo::has_memory)
    if (info_.cells_shared) {
      llama_memory_seq_cp(memory(), id(src), id(dst), rope_pos(id(src), p0), rope_pos(id(src), p1));
      if (mrope_ && src != dst) layouts_[static_cast<size_t>(id(dst))].copy_from(layouts_[static_cast<size_t>(id(src))], p1);
      return;
    }
    copy_stream(src, dst, std::max<Pos>(p0, 0), p1);
  }

  // A stream per sequence: libllama copies between streams only whole, and only at the next
  // decode (a save or restore before it would read or overwrite cells not yet copied). So the
  // source's state is saved and restored into the destination (which libllama empties first, and
  // fills from cell 0 in position order), then cut to the range. The destination's own cells,
  // by the contract (engine.h), hold tokens the source holds too.
  void copy_stream(SeqId src, SeqId dst, Pos p0, Pos p1) {
    if (src == dst) return;
    if (info_.family != ModelFamily::dense) {
      copy_stream_to(src, dst, p1);
      return;
    }
    const PosRange from = sequence_positions(src);
    const PosRange had = sequence_positions(dst);
    const Pos stop = p1 < 0 ? from.max + 1 : std::min(p1, from.max + 1);
    if (stop <= p0) return;
    const bool dst_empty = had.min < 0;
    const Pos low = dst_empty ? p0 : std::min(p0, had.min);
    if (from.min < 0 || from.min > low || (!dst_empty && (had.max + 1 < p0 || had.max >= stop))) {
      throw std::logic_error(std::format(
          "engine: a stream per sequence cannot copy [{}, {}) of sequence {} (holding [{}, {}]) into sequence {} "
          "(holding [{}, {}])", p0, stop, src, from.min, from.max, dst, had.min, had.max));
    }
    const Bytes state = save_sequence(src);
    if (!restore_sequence(state, dst)) throw std::runtime_error("engine: a copy between streams could not be restored");
    seq_rm(id(dst), stop, -1);
    if (low > from.min) seq_rm(id(dst), from.min, low);
  }

  // A sliding-window or hybrid model: libllama gives a sequence's positions as its window layers
  // hold them, or as its attention and recurrent memories both do (none once the window or the
  // state was dropped), while its full attention layers hold it from position 0 (every state
  // restored into a stream begins there). So the range is the caller's (the source holds it,
  // engine.h), and the positions the destination holds below it are the source's too. A recurrent
  // state holds the source's last position, which libllama refuses to cut: a copy cut before it
  // holds no such state (a checkpoint, or the rows computed next, give it one).
  void copy_stream_to(SeqId src, SeqId dst, Pos p1) {
    const Bytes state = save_sequence(src);
    if (!restore_sequence(state, dst)) throw std::runtime_error("engine: a copy between streams could not be restored");
    if (p1 < 0 || seq_rm(id(dst), p1, -1)) return;
    drop_checkpoint_state(dst);
    if (!seq_rm(id(dst), p1, -1)) throw std::runtime_error("engine: a copy between streams could not be cut");
  }

  bool remove_sequence(SeqId seq, Pos p0, Pos p1) override { return seq_rm(id(seq), p0, p1); }

  // libllama says a recurrent state can shift (its positions are only counted), and does not
  // refuse M-RoPE everywhere: a cell that moves must be attention K/V with one rotary position,
  // kept whole (a trimmable memory: dense, or a sliding window with its full cache).
  bool can_shift() const override {
    const llama_rope_type rope = llama_model_rope_type(model_.get());
    const bool one_position = rope == LLAMA_ROPE_TYPE_NORM || rope == LLAMA_ROPE_TYPE_NEOX;
    // With a stream per sequence a moved chunk would have to be copied alone into a sequence that
    // holds other cells, which streams cannot do (copy_stream).
    return one_position && memory_is_trimmable(info_) && info_.cells_shared && memory() != nullptr &&
           llama_memory_can_shift(memory());
  }

  bool shift_sequence(SeqId seq, Pos p0, Pos p1, Pos delta) override {
    if (!can_shift()) return false;
    llama_memory_seq_add(memory(), id(seq), p0, p1, delta);
    return true;
  }

  PosRange sequence_positions(SeqId seq) const override {
    if (memory() == nullptr) return {};
    const Pos first = llama_memory_seq_pos_min(memory(), id(seq));
    const Pos last = llama_memory_seq_pos_max(memory(), id(seq));
    if (!mrope_) return {first, last};
    const detail::RopeLayout& layout = layouts_[static_cast<size_t>(id(seq))];
    return {layout.index_of(first, false), layout.index_of(last, true)};
  }

  void clear() override {
    if (memory() != nullptr) llama_memory_clear(memory(), true);
    for (detail::RopeLayout& layout : layouts_) layout.clear();
  }

  Bytes save_sequence(SeqId seq) const override {
    Bytes out = raw_sequence(seq);
    if (mrope_) layouts_[static_cast<size_t>(id(seq))].append_to(out);
    return out;
  }

  Bytes raw_sequence(SeqId seq) const {
    if (window_states_) {
      if (Bytes pieces = window_states_->save(seq); !pieces.empty()) return pieces;
    }
    const size_t size = llama_state_seq_get_size_ext(ctx_.get(), id(seq), LLAMA_STATE_SEQ_FLAGS_NONE);
    Bytes out(size);
    const size_t written =
        llama_state_seq_get_data_ext(ctx_.get(), out.data(), out.size(), id(seq), LLAMA_STATE_SEQ_FLAGS_NONE);
    out.resize(written);
    return out;
  }

  Bytes save_checkpoint(SeqId seq) const override {
    Bytes out = raw_checkpoint(seq);  // empty for a trimmable memory
    if (mrope_ && !out.empty()) layouts_[static_cast<size_t>(id(seq))].append_to(out);
    return out;
  }

  Bytes raw_checkpoint(SeqId seq) const {
    if (memory_is_trimmable(info_)) return {};
    const size_t size = llama_state_seq_get_size_ext(ctx_.get(), id(seq), LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
    Bytes out(size);
    const size_t written =
        llama_state_seq_get_data_ext(ctx_.get(), out.data(), out.size(), id(seq), LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
    out.resize(written);
    return out;
  }

  bool restore_checkpoint(std::span<const std::uint8_t> state, SeqId dst) override {
    if (state.empty()) return false;
    std::optional<detail::RopeLayout::Read> layout;
    if (mrope_) {
      layout = detail::RopeLayout::read_from(state);
      if (!layout) return false;
      state = state.first(layout->inner_size);
    }
    if (llama_state_seq_set_data_ext(ctx_.get(), state.data(), state.size(), id(dst), LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) == 0) {
      return false;
    }
    // The checkpoint's sequence is this one's up to its position: the images before it.
    if (layout) layouts_[static_cast<size_t>(id(dst))].assign(std::move(layout->images));
    return true;
  }

  // Loading the partial state of an empty sequence empties the partial state of `seq` (libllama
  // clears the destination before it reads), and leaves the attention cells alone. libllama's
  // window cache clears the destination only when the state it reads has cells, so a window-only
  // model loads one window cell at a position no sequence reaches instead, then removes it.
  void drop_checkpoint_state(SeqId seq) override {
    if (!window_drop_.empty()) {
      llama_state_seq_set_data_ext(ctx_.get(), window_drop_.data(), window_drop_.size(), id(seq),
                                   LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
      llama_memory_seq_rm(memory(), id(seq), unreached_pos(), -1);
      return;
    }
    if (empty_checkpoint_.empty()) return;
    llama_state_seq_set_data_ext(ctx_.get(), empty_checkpoint_.data(), empty_checkpoint_.size(), id(seq),
                                 LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
  }

  bool restore_sequence(std::span<const std::uint8_t> state, SeqId dst) override {
    if (!mrope_) return restore_raw(state, dst);
    std::optional<detail::RopeLayout::Read> layout = detail::RopeLayout::read_from(state);
    if (!layout) {
      seq_rm(id(dst), -1, -1);
      return false;
    }
    if (!restore_raw(state.first(layout->inner_size), dst)) return false;
    layouts_[static_cast<size_t>(id(dst))].assign(std::move(layout->images));
    return true;
  }

  bool restore_raw(std::span<const std::uint8_t> state, SeqId dst) {
    if (state.empty()) return false;
    if (WindowStates::is_pieces(state)) return window_states_ && window_states_->restore(state, dst);
    const size_t read =
        llama_state_seq_set_data_ext(ctx_.get(), state.data(), state.size(), id(dst), LLAMA_STATE_SEQ_FLAGS_NONE);
    if (read == 0) {
      seq_rm(id(dst), -1, -1);
      return false;
    }
    return true;
  }

 private:
  llama_memory_t memory() const { return llama_get_memory(ctx_.get()); }

  // libllama's id of a sequence: with a stream per sequence of a hybrid model, every sequence has
  // an empty partner stream after its own (run_rowwise_streams), so ids go two by two.
  llama_seq_id id(SeqId seq) const { return seq < 0 ? seq : seq * id_stride_; }

  // The position libllama keys the cell of token `index` of its sequence `seq` by (rope_layout.h);
  // the index itself without M-RoPE. Negative positions ("from the start", "to the end") stay.
  Pos rope_pos(llama_seq_id seq, Pos index) const {
    if (!mrope_ || seq < 0 || index < 0) return index;
    return layouts_[static_cast<size_t>(seq)].t_of(index);
  }

  // Removes the cells of token indices [p0, p1) from libllama's sequence `seq` (every sequence when
  // negative), and the images that went with them from its layout.
  bool seq_rm(llama_seq_id seq, Pos p0, Pos p1) {
    if (memory() == nullptr) return true;  // a model without memory keeps nothing to remove
    const bool removed = llama_memory_seq_rm(memory(), seq, rope_pos(seq, p0), rope_pos(seq, p1));
    if (mrope_ && removed && p1 < 0) {
      for (size_t s = 0; s < layouts_.size(); ++s) {
        if (seq >= 0 && s != static_cast<size_t>(seq)) continue;
        if (p0 <= 0) {
          layouts_[s].clear();
        } else {
          layouts_[s].cut(p0);
        }
      }
    }
    return removed;
  }

  // A position past every one a request can reach (a sequence holds fewer than n_ctx tokens).
  Pos unreached_pos() const { return static_cast<Pos>(llama_n_ctx(ctx_.get())); }

  // The partial state of a sequence holding one window cell, at unreached_pos() (see
  // drop_checkpoint_state). Decoded into sequence 0 while every sequence is empty, then removed.
  Bytes one_window_cell_state() {
    llama_batch& batch = batch_.get();
    batch.n_tokens = 1;
    batch.token[0] = 0;
    batch.pos[0] = unreached_pos();
    batch.n_seq_id[0] = 1;
    batch.seq_id[0][0] = 0;
    batch.logits[0] = 1;
    Bytes state;
    if (llama_decode(ctx_.get(), batch) == 0) state = raw_checkpoint(0);
    llama_memory_clear(memory(), true);
    if (state.empty()) spdlog::warn("engine: cannot make a one-cell window state; dropped window cells stay until taken over");
    return state;
  }

  ModelPtr model_;
  std::vector<AdapterPtr> adapters_;  // by AdapterScale::id; outlive ctx_, which applies them
  ContextPtr ctx_;
  ModelInfo info_;
  std::vector<AdapterScale> applied_;  // what ctx_ applies now (use_adapters)
  detail::LlamaVocabulary vocab_;
  detail::OwnedBatch batch_;
  std::unique_ptr<Vision> vision_;
  std::unique_ptr<detail::OwnedBatch> embedding_batch_;  // made at the first image
  Bytes empty_checkpoint_;  // the partial state of an empty sequence (see drop_checkpoint_state)
  Bytes window_drop_;       // window-only models: one window cell at unreached_pos() (ditto)
  SeqId pad_seq_ = -1;      // the sequence of the row that pads a lone row (decode); -1: none
  std::int32_t reserved_ = 0;  // sequence ids past sequence_count() the engine keeps (pad, guard)
  std::optional<WindowStates> window_states_;  // the full window cache: states saved in pieces
  bool deterministic_ = false;
  std::int32_t stream_cells_ = 0;  // a stream per sequence: the cells a sequence may hold; 0: the pool's
  // Deterministic on a GPU: how every sequence's rows in a call are padded (measure_call_rows);
  // none on the CPU, where calls of 2 to kRowwiseRows rows compute a row alike.
  detail::CallPadding padding_;
  std::int32_t id_stride_ = 1;  // libllama's ids of this engine's sequences: id() (a hybrid model's partners)
  // The rows of the last decode() (run_rowwise_streams), when it took several libllama calls.
  bool logits_copied_ = false;
  std::vector<std::int32_t> copied_rows_;  // row of the decode → row of copied_logits_; -1: none
  std::vector<float> copied_logits_;       // n_vocab floats a row
  // M-RoPE (Qwen2-VL and later): the text model places an image's tokens at its grid, so a token's
  // index is not its position; each libllama sequence's layout maps the two (rope_layout.h).
  bool mrope_ = false;
  // Last pooling: the context pools nothing and outputs embeddings only for the calls whose rows
  // are read (run_batch); embeddings_on_ says whether the last call did.
  bool last_by_row_ = false;
  bool embeddings_on_ = false;
  std::vector<detail::RopeLayout> layouts_;  // by libllama's sequence id; empty without M-RoPE
  std::vector<llama_pos> rope_positions_;    // an embedding batch's four sections (decode_embeddings)

  class EngineRowLogits final : public detail::RowLogits {
   public:
    explicit EngineRowLogits(const LlamaEngine& engine) : engine_(engine) {}
    const float* row(std::int32_t row) const override { return engine_.row_logits(row); }
    bool copied() const override { return engine_.logits_copied_; }

   private:
    const LlamaEngine& engine_;
  };
  EngineRowLogits logits_;
};

ModelPtr load_model(const std::string& path, bool vocab_only, int gpu_layers, bool repack_weights = true) {
  detail::ensure_backend_initialized();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = vocab_only;
  params.n_gpu_layers = gpu_layers;
  // Repacked weights (Q4_0, Q4_K, IQ4_NL… on the CPU) multiply rows in groups of four and the
  // rest one by one, so a row's product depends on its place in the call.
  params.use_extra_bufts = repack_weights;
  ModelPtr model(llama_model_load_from_file(path.c_str(), params));
  if (!model) throw std::runtime_error("cannot load model '" + path + "' (missing file or not a GGUF model)");
  return model;
}

// K/V bytes of the window layers if they keep every cell of the context, and if they keep only
// their window: libllama then gives them window × sequences + one batch cells in all (padded to
// 256, at most the context), which is all the cache may ever leave unreclaimable plus one batch.
struct WindowCacheCost {
  std::uint64_t full = 0;
  std::uint64_t windowed = 0;
};

WindowCacheCost window_cache_cost(const ModelInfo& info, const ContextOptions& options) {
  if (info.family != ModelFamily::sliding_window || info.n_layer == 0) return {};
  const std::uint64_t per_layer_token = info.kv_bytes_per_token / static_cast<std::uint64_t>(info.n_layer);
  const auto window_layers = static_cast<std::uint64_t>(info.n_swa_layers);
  const auto n_seq = static_cast<std::uint64_t>(options.n_parallel + options.n_holder_seqs);
  const auto n_ctx = static_cast<std::uint64_t>(options.n_ctx);
  const std::uint64_t wanted = static_cast<std::uint64_t>(info.sliding_window) * n_seq + static_cast<std::uint64_t>(options.n_batch);
  const std::uint64_t windowed_cells = (std::min(n_ctx, wanted) + 255) / 256 * 256;
  return {window_layers * per_layer_token * n_ctx, window_layers * per_layer_token * windowed_cells};
}

// A hybrid model keeps K/V in its attention layers only, and libllama does not say which those
// are: the bytes one more token adds to a sequence's attention state (its whole state less the
// partial one) are measured on a scratch decode of two tokens, then the memory is cleared.
std::size_t measure_attention_bytes_per_token(llama_context* ctx) {
  detail::OwnedBatch owned(2);
  llama_batch& batch = owned.get();
  std::size_t sizes[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    batch.n_tokens = 1;
    batch.token[0] = 0;
    batch.pos[0] = i;
    batch.n_seq_id[0] = 1;
    batch.seq_id[0][0] = 0;
    batch.logits[0] = 1;
    if (llama_decode(ctx, batch) != 0) return 0;
    sizes[i] = llama_state_seq_get_size_ext(ctx, 0, LLAMA_STATE_SEQ_FLAGS_NONE) -
               llama_state_seq_get_size_ext(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
  }
  llama_memory_clear(llama_get_memory(ctx), true);
  return sizes[1] > sizes[0] ? sizes[1] - sizes[0] : 0;
}

// The model file's digest, from `cache_file` when it knows the file unchanged, logged either way.
std::string fingerprint_file(const std::string& model_path, const std::string& cache_file) {
  FingerprintCache cache(cache_file);
  const FileFingerprint found = cache.fingerprint(model_path);
  if (found.from_cache) {
    spdlog::info("model fingerprint {} ({}, from the cache {})", found.digest, kFingerprintAlgorithm, cache_file);
  } else {
    const double seconds = std::chrono::duration<double>(found.hash_time).count();
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(model_path, ec);
    spdlog::info("model fingerprint {} ({}, computed in {:.2f} s, {:.0f} MiB/s{})", found.digest, kFingerprintAlgorithm,
                 seconds, ec || seconds <= 0 ? 0.0 : static_cast<double>(bytes) / (1 << 20) / seconds,
                 cache_file.empty() ? ", no fingerprint cache" : "");
  }
  return found.digest;
}

bool decide_swa_full(const ModelInfo& info, const ContextOptions& options) {
  if (info.family != ModelFamily::sliding_window) return false;
  switch (options.swa_full) {
    case SwaFull::on: return true;
    case SwaFull::off: return false;
    case SwaFull::automatic:
      // Segments restored from the host, disk and shared tiers keep every window cell
      // (WindowStates), so the full window cache reuses any prefix exactly wherever it comes from.
      return window_cache_cost(info, options).full <= options.swa_full_max_bytes;
  }
  return false;
}

void log_reuse_policy(const ModelInfo& info, const ContextOptions& options) {
  switch (info.family) {
    case ModelFamily::dense:
      spdlog::info("prompt reuse: dense attention, any cached prefix is reused exactly");
      break;
    case ModelFamily::sliding_window: {
      const WindowCacheCost cost = window_cache_cost(info, options);
      if (!info.cells_shared) {
        spdlog::info("prompt reuse: sliding window ({} tokens) in a KV stream per sequence, whose window layers keep "
                     "every cell of the stream (so --swa-full {} does not apply); a copy between streams carries the "
                     "window of a sequence's last position only, so prefixes are reused at checkpoints",
                     info.sliding_window, options.swa_full == SwaFull::on ? "on" : options.swa_full == SwaFull::off ? "off" : "auto");
      } else if (info.swa_full) {
        spdlog::info("prompt reuse: sliding window ({} tokens) with the full window cache ({:.1f} MiB for {} of {} "
                     "layers instead of {:.1f} MiB): any cached prefix is reused exactly",
                     info.sliding_window, cost.full / 1048576.0, info.n_swa_layers, info.n_layer,
                     cost.windowed / 1048576.0);
      } else {
        spdlog::info("prompt reuse: sliding window ({} tokens) keeping only the window ({:.1f} MiB instead of "
                     "{:.1f} MiB for the full cache): prefixes are reused at checkpoints{}",
                     info.sliding_window, cost.windowed / 1048576.0, cost.full / 1048576.0,
                     options.swa_full == SwaFull::automatic
                         ? std::format(" (--swa-full auto: the full cache would exceed {:.1f} MiB)",
                                       options.swa_full_max_bytes / 1048576.0)
                         : "");
      }
      break;
    }
    case ModelFamily::recurrent:
    case ModelFamily::hybrid:
      spdlog::info("prompt reuse: {} state, prefixes are reused at checkpoints of the recurrent state",
                   family_name(info.family));
      break;
  }
}

// Runs `work` on a thread of its own that ends before this returns, and gives back its result or
// rethrows its exception.
//
// Why: Debian's ggml CPU backends run their threads with OpenMP, and libgomp keeps a pool of
// workers for every thread that has started a parallel region, for as long as that thread lives.
// It counts every pooled worker, and once they outnumber the CPUs it stops spinning at barriers
// (100 spins instead of about 300,000) and every thread sleeps in the kernel at each of the
// hundreds of barriers in a model call. Loading a model starts such a region (weights are
// converted for AMX or repacked on every thread), and so does a load that decodes (a window
// model's one-cell state, a projector's warm-up). A load on the server's main thread left a pool
// there; with the scheduler thread's own, two cores had three pooled threads, and decode ran at
// half of llama-server's speed with a second thread that bought nothing. libgomp frees a thread's
// pool when the thread exits, so after a load only the thread that decodes keeps one.
template <class Work>
auto on_passing_thread(Work work) -> decltype(work()) {
  std::packaged_task<decltype(work())()> task(std::move(work));
  auto result = task.get_future();
  std::jthread(std::move(task)).join();
  return result.get();
}

// --deterministic on a GPU: how a call pads each sequence's rows, measured on the model (logged
// with the cheaper rules it refuted). Throws when no rule makes every row alike.
detail::CallPadding measure_padding(llama_context* ctx, const ModelInfo& info, std::int32_t n_batch,
                                    std::int32_t stream_cells, int n_seq) {
  const auto start = std::chrono::steady_clock::now();
  const detail::CallRows measured = detail::measure_call_rows(ctx, info.n_vocab, n_batch, stream_cells, n_seq);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (measured.padding.least < 1) {
    throw std::runtime_error(std::format(
        "--deterministic with layers on a GPU: no way of padding calls of up to {} rows computes every row alike on "
        "this device (measured on the model); use --gpu-layers 0 with it, or a larger --batch-size",
        measured.largest));
  }
  spdlog::info("deterministic on a GPU: each sequence's rows in a call are padded to at least {} and to a multiple of "
               "{} (a lone decode token takes {} rows), with which every row is computed alike (measured on the model "
               "in {:.0f} ms; cheaper rules, at least/multiple, that computed a row otherwise: {})",
               measured.padding.least, measured.padding.multiple, measured.padding.rows_for(1), ms,
               measured.rejected.empty() ? "none" : measured.rejected);
  return measured.padding;
}

// The families a KV stream per sequence serves: those with attention cells whose place could change
// a sum. A hybrid model's lone decode row cannot be padded in its own stream (its recurrent state
// would take the pad row too), so each of its sequences gets an empty partner stream next to its
// own, which libllama batches with it (it batches consecutive ids only).
bool streams_serve(ModelFamily family) {
  return family == ModelFamily::dense || family == ModelFamily::sliding_window || family == ModelFamily::hybrid;
}

// The families whose calls can be padded on a GPU: every row in the sequence's own stream.
bool padding_serves(ModelFamily family) { return family == ModelFamily::dense || family == ModelFamily::sliding_window; }

// Loads a LoRA adapter for `model` into `into`; libllama's complaint becomes the error (an adapter
// made for another architecture or shapes, a file that is no adapter).
AdapterInfo load_adapter(llama_model* model, const std::string& path, const std::string& fingerprint_cache,
                         std::vector<AdapterPtr>& into) {
  if (!std::filesystem::is_regular_file(path)) throw std::runtime_error(std::format("--lora: no file at '{}'", path));
  AdapterPtr adapter;
  std::string complaint;
  {
    detail::LlamaErrorCapture capture;
    adapter.reset(llama_adapter_lora_init(model, path.c_str()));
    complaint = capture.text();
  }
  if (!adapter) {
    throw std::runtime_error(std::format("--lora: cannot load '{}' as a LoRA adapter of this model{}", path,
                                         complaint.empty() ? "" : ": " + complaint));
  }
  AdapterInfo info{.path = path, .name = std::filesystem::path(path).stem().string()};
  std::string alpha(64, '\0');
  if (const int32_t n = llama_adapter_meta_val_str(adapter.get(), "adapter.lora.alpha", alpha.data(), alpha.size()); n > 0) {
    alpha.resize(static_cast<std::size_t>(n));
    try {
      info.alpha = std::stof(alpha);
    } catch (const std::exception&) {
      info.alpha = 0;
    }
  }
  info.fingerprint = FingerprintCache(fingerprint_cache).fingerprint(path).digest;
  into.push_back(std::move(adapter));
  return info;
}

std::unique_ptr<Engine> load_llama_engine_here(const std::string& model_path, const ContextOptions& options,
                                               const std::string& model_id) {
  if (options.n_parallel < 1) throw std::runtime_error("--parallel must be at least 1");
  if (options.n_batch < 1) throw std::runtime_error("--batch-size must be at least 1");
  if (options.n_holder_seqs < 0) throw std::runtime_error("holder sequence count must not be negative");
  detail::ensure_backend_initialized();
  // On the CPU --deterministic rests on ggml-cpu computing a row alike in every call of 2 to 63
  // rows. A GPU backend's kernels do not (prefixd_row_probe --gpu): there every call is padded to a
  // size from which all sizes compute a row alike, measured on the model (measure_call_rows), in
  // a stream per sequence, where the padding rows take cells after the sequence's own.
  const bool padded = options.deterministic && options.gpu_layers != 0 && detail::has_gpu_device();
  if (padded && options.kv_layout == KvLayout::pool) {
    throw std::runtime_error("--deterministic with layers on a GPU pads every call in a KV stream per sequence: drop "
                             "--kv-unified, or use --gpu-layers 0");
  }
  int n_seq = options.n_parallel + options.n_holder_seqs;
  if (n_seq > static_cast<int>(llama_max_parallel_sequences())) {
    throw std::runtime_error("--parallel plus cache holder sequences exceeds libllama's limit of " +
                             std::to_string(llama_max_parallel_sequences()));
  }
  ModelPtr model = load_model(model_path, false, options.gpu_layers, !options.deterministic);
  ModelInfo info = detail::describe_model(model.get(), model_path, model_id);
  info.fingerprint = fingerprint_file(model_path, options.fingerprint_cache);
  std::vector<AdapterPtr> adapters;
  for (const std::string& path : options.lora_paths) {
    AdapterInfo adapter = load_adapter(model.get(), path, options.fingerprint_cache, adapters);
    spdlog::info("LoRA adapter {}: {} (alpha {}, fingerprint {})", info.adapters.size(), path, adapter.alpha,
                 adapter.fingerprint);
    info.adapters.push_back(std::move(adapter));
  }
  info.on_accelerator = options.gpu_layers != 0 && detail::has_gpu_device();

  // A stream per sequence where asked, or (automatic) where it makes --deterministic exact under
  // concurrency: a model with attention cells (ContextOptions::kv_layout, streams_serve).
  // Not for embeddings: a deterministic stream per sequence splits a call by its rows, and each
  // part would replace the outputs of the last.
  const bool streams = options.kv_layout == KvLayout::streams ||
                       (options.kv_layout == KvLayout::automatic && options.deterministic && streams_serve(info.family) &&
                        !options.embeddings);
  // Each holder is a whole stream there: at most n_holder_seqs_streams of the cache's ids.
  if (streams && options.n_holder_seqs_streams >= 0) {
    n_seq = options.n_parallel + std::min(options.n_holder_seqs, options.n_holder_seqs_streams);
  }
  // A hybrid model's sequences each have an empty partner stream (streams_serve): libllama's ids
  // go two by two.
  const int id_stride = streams && info.family == ModelFamily::hybrid ? 2 : 1;
  if (n_seq * id_stride > static_cast<int>(llama_max_parallel_sequences())) {
    throw std::runtime_error(std::format("--parallel plus cache holder sequences, each with a partner stream, exceeds "
                                         "libllama's limit of {} sequences", llama_max_parallel_sequences()));
  }
  llama_context_params params = llama_context_default_params();
  params.n_ctx = static_cast<uint32_t>(options.n_ctx);
  if (options.n_ctx == 0) {
    // With a stream per sequence every sequence has the context's cells: the budget is theirs.
    const std::uint64_t budget = options.kv_memory_budget / static_cast<std::uint64_t>(streams ? n_seq * id_stride : 1);
    const ContextFit fit = fit_context_size(info, budget);
    params.n_ctx = static_cast<uint32_t>(fit.n_ctx);
    const double kv_mib =
        static_cast<double>(info.kv_bytes_per_token) * fit.n_ctx * (streams ? n_seq * id_stride : 1) / (1 << 20);
    if (fit.limited_by_memory) {
      spdlog::warn("context: {} cells, less than the model's training context of {}: its K/V would not fit in {:.0f} MiB{} "
                   "(K/V {:.0f} MiB; set --ctx-size to choose)",
                   fit.n_ctx, info.n_ctx_train, static_cast<double>(options.kv_memory_budget) / (1 << 20),
                   streams ? std::format(" as {} streams", n_seq * id_stride) : std::string(), kv_mib);
    } else {
      spdlog::info("context: {} cells, {} (K/V {:.0f} MiB)", fit.n_ctx,
                   info.n_ctx_train > 0 ? "the model's training context" : "the model does not say its training context",
                   kv_mib);
    }
  }
  params.n_batch = static_cast<uint32_t>(options.n_batch);
  params.n_ubatch = static_cast<uint32_t>(options.n_batch);
  const int threads = options.n_threads > 0 ? options.n_threads
                                            : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  params.n_threads = threads;
  params.n_threads_batch = threads;
  params.kv_unified = !streams;  // one cell pool: seq_cp shares cells with no copy
  info.cells_shared = !streams;
  if (padded && !padding_serves(info.family)) {
    throw std::runtime_error(std::format(
        "--deterministic with layers on a GPU serves dense and sliding-window models only (it pads every call in a "
        "KV stream per sequence); this model's family is {}: use --gpu-layers 0 with it", family_name(info.family)));
  }
  if (streams && !streams_serve(info.family)) {
    throw std::runtime_error(std::format(
        "a KV stream per sequence (--no-kv-unified) serves models with attention cells only; this model's family is {} "
        "(one state per sequence, which needs no stream): use the unified pool (--kv-unified)",
        family_name(info.family)));
  }
  params.swa_full = decide_swa_full(info, options);
  info.swa_full = params.swa_full && info.family == ModelFamily::sliding_window;
  if (streams && info.family == ModelFamily::sliding_window) {
    // In its own stream a sequence's window cells then never wrap around below its newer ones
    // (libllama takes over a cell behind the window only when it finds no free one), so they lie
    // in position order as the full layers' do. libllama saves only the window of a sequence's
    // last position, and a copy between streams is a save and a restore: the cache resumes such a
    // model at a kept state (a window-only family to it), never inside a copied window.
    params.swa_full = true;
    info.swa_full = false;
  }
  if (info.swa_full && options.n_holder_seqs > 0 && n_seq + 1 < static_cast<int>(llama_max_parallel_sequences())) {
    info.window_pin = n_seq;  // and n_seq + 1 (src/cache/cell_pin.h)
    n_seq += 2;
  }
  // The full window cache saves and restores states in pieces (WindowStates), with one more id.
  SeqId guard_seq = -1;
  if (info.swa_full && n_seq + 1 < static_cast<int>(llama_max_parallel_sequences())) {
    guard_seq = n_seq;
    n_seq += 1;
  } else if (info.swa_full) {
    spdlog::warn("no sequence id left for the full window cache's states: a prefix restored from host or disk "
                 "cannot be cut back exactly");
  }
  // The last sequence id pads lone rows (LlamaEngine::decode); none when libllama has no id left,
  // or with a stream per sequence (a lone row is padded in its own stream there).
  SeqId pad_seq = -1;
  if (streams) {
  } else if (n_seq < static_cast<int>(llama_max_parallel_sequences())) {
    pad_seq = n_seq;
    n_seq += 1;
  } else {
    spdlog::warn("no sequence id left to pad one-row batches: a cached prompt may answer unlike a cold one");
  }
  // Pooled embeddings: libllama reserves its worst-case graph with the batch split evenly between
  // the sequences, and aborts when their count does not divide it. Unused ids go in before the
  // reserved ones (which stay last: sequence_count()).
  if (options.embeddings && options.n_batch % (n_seq * id_stride) != 0) {
    int rounded = n_seq;
    while (rounded < options.n_batch && options.n_batch % (rounded * id_stride) != 0) ++rounded;
    if (rounded > static_cast<int>(llama_max_parallel_sequences()) || options.n_batch % (rounded * id_stride) != 0) {
      throw std::runtime_error(std::format("--embeddings: libllama needs the {} sequences this context holds to divide "
                                           "--batch-size {}: choose a batch size with a divisor from {} to {}",
                                           n_seq * id_stride, options.n_batch, n_seq, llama_max_parallel_sequences()));
    }
    const int extra = rounded - n_seq;
    for (SeqId* reserved : {&pad_seq, &guard_seq, &info.window_pin}) {
      if (*reserved >= 0) *reserved += extra;
    }
    n_seq = rounded;
  }
  // libllama needs a batch to hold one output row per sequence (it aborts otherwise).
  if (options.n_batch < n_seq * id_stride) {
    throw std::runtime_error("--batch-size " + std::to_string(options.n_batch) + " is smaller than the " +
                             std::to_string(n_seq * id_stride) + " sequences this context holds (--parallel " +
                             std::to_string(options.n_parallel) + ", the prompt cache's holders and working ids): use at least " +
                             std::to_string(n_seq * id_stride));
  }
  params.n_seq_max = static_cast<uint32_t>(n_seq * id_stride);
  if (streams) params.n_ctx *= params.n_seq_max;
  params.no_perf = true;
  params.flash_attn_type = options.flash_attention ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  if (options.embeddings) {
    // The calls of a deterministic stream per sequence are split by row count, and each would
    // replace the last one's pooled outputs.
    if (options.deterministic && streams) {
      throw std::runtime_error("--embeddings with --deterministic needs the unified KV pool: add --kv-unified");
    }
    params.embeddings = true;
    params.pooling_type = llama_pooling_of(options.pooling);
  }
  ContextPtr ctx(llama_init_from_model(model.get(), params));
  if (!ctx) throw std::runtime_error("cannot create a context for '" + model_path + "' (out of memory?)");
  info.has_memory = llama_get_memory(ctx.get()) != nullptr;
  // Last pooling is the last token's own output, which a generating context gives as well once
  // it outputs embeddings. Such a context splits and computes calls as a generating one does, where
  // every kind of cache hit computes the last token as a cold prompt does (a pooling context splits
  // a call by sequence, so a prompt's last token computed alone would take other kernels than
  // beside the tokens before it), and it outputs embeddings only for the calls that read them
  // (LlamaEngine::run_batch): libllama outputs every row of a call while they are on, logits too.
  bool last_by_row = false;
  if (options.embeddings && info.has_memory && llama_pooling_type(ctx.get()) == LLAMA_POOLING_TYPE_LAST) {
    params.pooling_type = LLAMA_POOLING_TYPE_NONE;
    params.embeddings = false;
    ctx.reset(llama_init_from_model(model.get(), params));
    if (!ctx) throw std::runtime_error("cannot create a context for '" + model_path + "' (out of memory?)");
    last_by_row = true;
  }
  if (options.embeddings) {
    info.embeddings = true;
    info.pooling = last_by_row ? Pooling::last : pooling_of(llama_pooling_type(ctx.get()));
    info.embedding_width = info.pooling == Pooling::rank ? static_cast<std::int32_t>(llama_model_n_cls_out(model.get()))
                                                         : llama_model_n_embd_out(model.get());
    if (info.embedding_width <= 0) {
      throw std::runtime_error(std::format("--pooling {}: this model has no {}", pooling_name(info.pooling),
                                           info.pooling == Pooling::rank ? "classifier head (not a reranker)" : "output width"));
    }
    spdlog::info("embeddings: pooling {}{}, {} floats per {}, {}", pooling_name(info.pooling),
                 options.pooling == Pooling::model ? " (the model's)" : "", info.embedding_width,
                 info.pooling == Pooling::none ? "token" : info.pooling == Pooling::rank ? "pair" : "input",
                 !info.has_memory ? "no memory: each input is computed in one call, nothing is cached"
                 : info.pooling == Pooling::last ? "from the last token: inputs reuse cached prefixes"
                                                 : "every token in one call: inputs are not cached");
  }
  info.placement = detail::describe_placement(options.gpu_layers, info, llama_n_ctx(ctx.get()));
  // Another device's kernels compute other K/V for the same tokens: a prefix saved on the CPU is
  // not reused on a GPU, nor between GPUs of another kind, nor with other layers offloaded.
  std::string compute = "cpu";
  if (info.placement.layers_offloaded > 0 || info.placement.output_offloaded) {
    compute = std::format("{}+{}", info.placement.layers_offloaded, info.placement.output_offloaded ? 1 : 0);
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
      if (ggml_backend_dev_t device = ggml_backend_dev_get(i); detail::is_gpu(device)) {
        compute += std::format(",{}", ggml_backend_dev_description(device));
      }
    }
  }
  detail::CallPadding padding;
  if (padded) {
    padding = measure_padding(ctx.get(), info, options.n_batch, static_cast<std::int32_t>(llama_n_ctx_seq(ctx.get())), n_seq);
  }
  info.runtime_signature = detail::runtime_signature(model.get(), ctx.get(), params) +
                           (options.deterministic ? "deterministic=on;" : "") +
                           (guard_seq >= 0 ? "window_states=pieces;" : "") +
                           // A saved state carries its images' places after libllama's bytes.
                           (uses_mrope(model.get()) ? "rope_layout=1;" : "") + std::format("compute={};", compute);
  spdlog::debug("runtime signature: {}", info.runtime_signature);
  if (info.family == ModelFamily::hybrid) {
    if (const std::size_t measured = measure_attention_bytes_per_token(ctx.get()); measured > 0) {
      info.kv_bytes_per_token = measured;
    }
  }
  spdlog::info("model {} ({}, family {}, {} layers, {} KV bytes/token), context {} cells, {} sequences, {} threads",
               info.id, info.description, family_name(info.family), info.n_layer, info.kv_bytes_per_token,
               llama_n_ctx(ctx.get()), n_seq, threads);
  detail::log_placement(info, options.gpu_layers);
  log_reuse_policy(info, options);
  std::unique_ptr<Vision> vision;
  if (!options.mmproj_path.empty()) {
    vision = detail::load_mtmd_vision(options.mmproj_path, model.get(),
                                      detail::VisionOptions{.n_threads = threads,
                                                            .use_gpu = info.on_accelerator,
                                                            .flash_attention = options.flash_attention,
                                                            .n_batch = options.n_batch,
                                                            .max_pixels = options.max_image_pixels,
                                                            .max_audio_seconds = options.max_audio_seconds});
  }
  if (streams) {
    spdlog::info("KV layout: a stream of {} cells per sequence ({} streams, {:.0f} MiB of K/V in all): a sequence's cells lie "
                 "from its stream's first cell in position order whatever the others hold, and copies between sequences "
                 "duplicate cells (--kv-unified shares one pool instead){}",
                 llama_n_ctx_seq(ctx.get()), n_seq * id_stride,
                 static_cast<double>(info.kv_bytes_per_token) * llama_n_ctx(ctx.get()) / (1 << 20),
                 id_stride > 1 ? std::format("; each of the {} sequences has an empty partner stream that pads its lone "
                                             "decode row (a recurrent state cannot take a pad row of its own)", n_seq)
                               : std::string());
  }
  // A stream per sequence: its cells, of which a sequence may hold fewer when deterministic, for
  // the rows that pad its calls in its own stream (run_rowwise_streams).
  const std::int32_t pad_cells = !options.deterministic || id_stride > 1 ? 0 : padded ? padding.rows_for(1) - 1 : 1;
  const std::int32_t stream_cells = streams ? static_cast<std::int32_t>(llama_n_ctx_seq(ctx.get())) - pad_cells : 0;
  return std::make_unique<LlamaEngine>(std::move(model), std::move(adapters), std::move(ctx), std::move(info),
                                       std::move(vision), pad_seq, guard_seq, options.deterministic, stream_cells,
                                       padding, id_stride);
}

}  // namespace

std::unique_ptr<Engine> load_llama_engine(const std::string& model_path, const ContextOptions& options,
                                          const std::string& model_id) {
  return on_passing_thread([&] { return load_llama_engine_here(model_path, options, model_id); });
}

ModelInfo inspect_model(const std::string& model_path, const std::string& fingerprint_cache) {
  return on_passing_thread([&] {
    ModelPtr model = load_model(model_path, false, 0);
    ModelInfo info = detail::describe_model(model.get(), model_path, {});
    info.fingerprint = FingerprintCache(fingerprint_cache).fingerprint(model_path).digest;
    return info;
  });
}

}  // namespace prefixd::engine
