#include "modelgen/writer.h"

#include <ggml-cpp.h>
#include <gguf.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <format>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <thread>
#include <type_traits>

#include "modelgen/weights.h"

namespace prefixd::modelgen {

namespace {

// llama_ftype values for general.file_type.
std::uint32_t file_type(ggml_type matrix_type) {
  switch (matrix_type) {
    case GGML_TYPE_F16: return 1;   // LLAMA_FTYPE_MOSTLY_F16
    case GGML_TYPE_Q8_0: return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    default: return 0;              // LLAMA_FTYPE_ALL_F32
  }
}

void set_string_array(gguf_context* ctx, const char* key, const std::vector<std::string>& strings) {
  std::vector<const char*> pointers;  // borrowed: gguf copies the strings
  pointers.reserve(strings.size());
  for (const auto& s : strings) {
    pointers.push_back(s.c_str());
  }
  gguf_set_arr_str(ctx, key, pointers.data(), pointers.size());
}

void set_meta(gguf_context* ctx, const std::string& key, const MetaValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::uint32_t>) {
          gguf_set_val_u32(ctx, key.c_str(), v);
        } else if constexpr (std::is_same_v<T, std::int32_t>) {
          gguf_set_val_i32(ctx, key.c_str(), v);
        } else if constexpr (std::is_same_v<T, float>) {
          gguf_set_val_f32(ctx, key.c_str(), v);
        } else if constexpr (std::is_same_v<T, bool>) {
          gguf_set_val_bool(ctx, key.c_str(), v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          gguf_set_val_str(ctx, key.c_str(), v.c_str());
        } else if constexpr (std::is_same_v<T, std::vector<std::uint32_t>>) {
          gguf_set_arr_data(ctx, key.c_str(), GGUF_TYPE_UINT32, v.data(), v.size());
        } else if constexpr (std::is_same_v<T, std::vector<std::int32_t>>) {
          gguf_set_arr_data(ctx, key.c_str(), GGUF_TYPE_INT32, v.data(), v.size());
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          gguf_set_arr_data(ctx, key.c_str(), GGUF_TYPE_FLOAT32, v.data(), v.size());
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          set_string_array(ctx, key.c_str(), v);
        }
      },
      value);
}

void set_metadata(gguf_context* ctx, const ModelSpec& spec, const Vocabulary& vocab, ggml_type matrix_type,
                  std::uint64_t seed) {
  gguf_set_val_str(ctx, "general.architecture", spec.architecture.c_str());
  gguf_set_val_str(ctx, "general.type", spec.file_kind.c_str());
  gguf_set_val_str(ctx, "general.name", spec.display_name.c_str());
  gguf_set_val_u32(ctx, "general.file_type", file_type(matrix_type));
  gguf_set_val_u32(ctx, "general.quantization_version", GGML_QNT_VERSION);
  // Provenance, ignored by llama.cpp: which preset and seed produced this file.
  gguf_set_val_str(ctx, "prefixd.modelgen.preset", spec.preset.c_str());
  gguf_set_val_u64(ctx, "prefixd.modelgen.seed", seed);

  for (const auto& entry : spec.hparams) {
    set_meta(ctx, spec.architecture + "." + entry.key, entry.value);
  }
  for (const auto& entry : spec.metadata) {
    set_meta(ctx, entry.key, entry.value);
  }
  if (spec.vocab.size == 0) return;  // a projector: no tokenizer

  gguf_set_val_str(ctx, "tokenizer.ggml.model", vocab.model.c_str());
  gguf_set_val_str(ctx, "tokenizer.ggml.pre", vocab.pre.c_str());
  if (vocab.token_type_count > 0) {
    gguf_set_val_u32(ctx, "tokenizer.ggml.token_type_count", vocab.token_type_count);
  }
  set_string_array(ctx, "tokenizer.ggml.tokens", vocab.tokens);
  gguf_set_arr_data(ctx, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, vocab.token_types.data(),
                    vocab.token_types.size());
  if (!vocab.merges.empty()) {
    set_string_array(ctx, "tokenizer.ggml.merges", vocab.merges);
  }
  // Special token ids: only those the vocabulary has ("seperator" is llama.cpp's spelling).
  const std::pair<const char*, std::int32_t> id_keys[] = {
      {"tokenizer.ggml.bos_token_id", vocab.bos_id},
      {"tokenizer.ggml.eos_token_id", vocab.eos_id},
      {"tokenizer.ggml.unknown_token_id", vocab.unk_id},
      {"tokenizer.ggml.seperator_token_id", vocab.sep_id},
      {"tokenizer.ggml.padding_token_id", vocab.pad_id},
      {"tokenizer.ggml.cls_token_id", vocab.cls_id},
      {"tokenizer.ggml.mask_token_id", vocab.mask_id},
      {"tokenizer.ggml.fim_pre_token_id", vocab.fim.prefix},
      {"tokenizer.ggml.fim_mid_token_id", vocab.fim.middle},
      {"tokenizer.ggml.fim_suf_token_id", vocab.fim.suffix},
      {"tokenizer.ggml.fim_pad_token_id", vocab.fim.pad},
      {"tokenizer.ggml.fim_rep_token_id", vocab.fim.repository},
      {"tokenizer.ggml.fim_sep_token_id", vocab.fim.file_separator}};
  for (const auto& [key, id] : id_keys) {
    if (id >= 0) gguf_set_val_u32(ctx, key, static_cast<std::uint32_t>(id));
  }
  gguf_set_val_bool(ctx, "tokenizer.ggml.add_bos_token", vocab.add_bos);
  gguf_set_val_bool(ctx, "tokenizer.ggml.add_eos_token", vocab.add_eos);
  if (vocab.add_sep) {
    gguf_set_val_bool(ctx, "tokenizer.ggml.add_sep_token", *vocab.add_sep);
  }
  if (vocab.lowercase) {
    gguf_set_val_bool(ctx, "tokenizer.ggml.normalizer.lowercase", true);
  }
  if (!vocab.chat_template.empty()) {
    gguf_set_val_str(ctx, "tokenizer.chat_template", std::string(vocab.chat_template).c_str());
  }
}

class Output {
 public:
  explicit Output(const std::filesystem::path& path) : path_(path), file_(path, std::ios::binary | std::ios::trunc) {
    check("open");
  }
  void write(const void* data, std::size_t n) {
    file_.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    check("write");
    written_ += n;
  }
  // Zero bytes up to `offset`; tensor data in GGUF starts on alignment boundaries.
  void pad_to(std::uint64_t offset) {
    static constexpr char zeros[64] = {};
    if (offset < written_) {
      throw std::runtime_error(std::format("internal error: GGUF layout overlaps at offset {}", offset));
    }
    while (written_ < offset) {
      write(zeros, std::min<std::uint64_t>(sizeof zeros, offset - written_));
    }
  }
  void close() {
    file_.close();
    check("close");
  }
  std::uint64_t written() const { return written_; }

 private:
  void check(const char* what) const {
    if (!file_) {
      throw std::runtime_error(std::format("cannot {} {}", what, path_.string()));
    }
  }
  std::filesystem::path path_;
  std::ofstream file_;
  std::uint64_t written_ = 0;
};

// Generates a tensor's chunks on `n_threads` threads, a window of chunks at a time, and writes
// them in order. The output does not depend on the thread count (see weights.h).
void write_tensor_data(Output& out, const TensorSpec& tensor, ggml_type type, std::uint64_t seed, unsigned n_threads) {
  const std::int64_t n_chunks = chunk_count(tensor);
  const std::int64_t window = std::max<std::int64_t>(1, 4 * static_cast<std::int64_t>(n_threads));
  std::vector<std::vector<std::uint8_t>> buffers(static_cast<std::size_t>(std::min(window, n_chunks)));
  for (std::int64_t base = 0; base < n_chunks; base += window) {
    const std::int64_t n = std::min(window, n_chunks - base);
    const unsigned workers = static_cast<unsigned>(std::min<std::int64_t>(n_threads, n));
    if (workers <= 1) {
      for (std::int64_t i = 0; i < n; ++i) {
        encode_chunk(tensor, type, seed, base + i, buffers[static_cast<std::size_t>(i)]);
      }
    } else {
      std::atomic<std::int64_t> next{0};
      std::exception_ptr failure;
      std::mutex failure_mutex;
      {
        std::vector<std::jthread> pool;
        for (unsigned w = 0; w < workers; ++w) {
          pool.emplace_back([&] {
            try {
              for (std::int64_t i = next++; i < n; i = next++) {
                encode_chunk(tensor, type, seed, base + i, buffers[static_cast<std::size_t>(i)]);
              }
            } catch (...) {
              const std::scoped_lock lock(failure_mutex);
              failure = std::current_exception();
            }
          });
        }
      }  // joins
      if (failure) {
        std::rethrow_exception(failure);
      }
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const auto& buffer = buffers[static_cast<std::size_t>(i)];
      out.write(buffer.data(), buffer.size());
    }
  }
}

}  // namespace

ggml_type storage_type(const TensorSpec& tensor, ggml_type matrix_type) {
  if (tensor.storage != StorageClass::matrix) {
    return GGML_TYPE_F32;
  }
  return tensor.row_length() % ggml_blck_size(matrix_type) == 0 ? matrix_type : GGML_TYPE_F32;
}

WriteResult write_gguf(const ModelSpec& spec, const Vocabulary& vocab, ggml_type matrix_type, std::uint64_t seed,
                       const std::filesystem::path& path) {
  if (vocab.tokens.size() != spec.vocab.size) {
    throw std::runtime_error(std::format("internal error: vocabulary has {} tokens, preset expects {}",
                                         vocab.tokens.size(), spec.vocab.size));
  }
  const gguf_context_ptr gguf{gguf_init_empty()};
  set_metadata(gguf.get(), spec, vocab, matrix_type, seed);

  // Tensor descriptors only (no_alloc): gguf computes each tensor's offset from its type and
  // shape; the data is streamed afterwards.
  const ggml_init_params params{spec.tensors.size() * ggml_tensor_overhead(), nullptr, true};
  const ggml_context_ptr ggml{ggml_init(params)};
  if (!ggml) {
    throw std::runtime_error("cannot create a ggml context");
  }
  std::vector<ggml_type> types;
  WriteResult result;
  for (const auto& tensor : spec.tensors) {
    types.push_back(storage_type(tensor, matrix_type));
    ggml_tensor* t = ggml_new_tensor(ggml.get(), types.back(), static_cast<int>(tensor.ne.size()), tensor.ne.data());
    ggml_set_name(t, tensor.name.c_str());
    gguf_add_tensor(gguf.get(), t);
    result.parameters += static_cast<std::uint64_t>(tensor.element_count());
  }

  // The metadata blob ends padded to the alignment; tensor i starts at meta + its offset.
  std::vector<std::uint8_t> meta(gguf_get_meta_size(gguf.get()));
  gguf_get_meta_data(gguf.get(), meta.data());
  const std::uint64_t alignment = gguf_get_alignment(gguf.get());

  const unsigned n_threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  Output out(path);
  out.write(meta.data(), meta.size());
  for (std::size_t i = 0; i < spec.tensors.size(); ++i) {
    const auto id = static_cast<std::int64_t>(i);
    out.pad_to(meta.size() + gguf_get_tensor_offset(gguf.get(), id));
    const std::uint64_t start = out.written();
    write_tensor_data(out, spec.tensors[i], types[i], seed, n_threads);
    if (out.written() - start != gguf_get_tensor_size(gguf.get(), id)) {
      throw std::runtime_error(std::format("internal error: tensor {} has {} bytes, expected {}",
                                           spec.tensors[i].name, out.written() - start,
                                           gguf_get_tensor_size(gguf.get(), id)));
    }
  }
  out.pad_to((out.written() + alignment - 1) / alignment * alignment);
  out.close();
  result.bytes = out.written();
  return result;
}

}  // namespace prefixd::modelgen
