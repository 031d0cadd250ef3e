// generate_model: resolve options, build the vocabulary, write to a temporary file, rename.
#include "modelgen/modelgen.h"

#include <charconv>
#include <chrono>
#include <optional>
#include <cstdio>
#include <filesystem>
#include <format>
#include <stdexcept>
#include <system_error>

#include "modelgen/spec.h"
#include "modelgen/vocab.h"
#include "modelgen/writer.h"

namespace prefixd::modelgen {

namespace {

ggml_type parse_weight_type(const std::string& name) {
  if (name == "f32") return GGML_TYPE_F32;
  if (name == "f16") return GGML_TYPE_F16;
  if (name == "q8_0") return GGML_TYPE_Q8_0;
  throw std::runtime_error(std::format("unknown weight type '{}' (expected f32, f16 or q8_0)", name));
}

// Removes the temporary file unless the write was committed, so a failed or interrupted
// generation (exception) never leaves a half-written file behind.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::filesystem::path path) : path_(std::move(path)) {}
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (!committed_) {
      std::error_code ignored;
      std::filesystem::remove(path_, ignored);
    }
  }
  const std::filesystem::path& path() const { return path_; }
  // rename(2) replaces the destination atomically: readers see the old file or the new one.
  void commit_as(const std::filesystem::path& destination) {
    std::error_code ec;
    std::filesystem::rename(path_, destination, ec);
    if (ec) {
      throw std::runtime_error(std::format("cannot rename {} to {}: {}", path_.string(), destination.string(),
                                           ec.message()));
    }
    committed_ = true;
  }

 private:
  std::filesystem::path path_;
  bool committed_ = false;
};

// The block index of a tensor named "blk.N.<what>", or nullopt.
std::optional<std::uint32_t> block_of(const std::string& name) {
  if (!name.starts_with("blk.")) return std::nullopt;
  std::uint32_t index = 0;
  const char* begin = name.data() + 4;
  const auto [end, error] = std::from_chars(begin, name.data() + name.size(), index);
  if (error != std::errc() || end == begin || *end != '.') return std::nullopt;
  return index;
}

std::uint32_t block_count(const ModelSpec& spec) {
  for (const MetaEntry& e : spec.hparams) {
    if (e.key == "block_count") return std::get<std::uint32_t>(e.value);
  }
  throw std::runtime_error(std::format("preset {} has no block_count", spec.preset));
}

// Per-layer hyper-parameters (arrays with one value per block) would have to be cut too; only
// presets without them take --layers. An array that describes the whole model (M-RoPE's sections
// of the rotary dimensions, a classifier's output labels) stays as it is.
void keep_layers(ModelSpec& spec, std::uint32_t layers) {
  const std::uint32_t all = block_count(spec);
  if (layers > all) throw std::runtime_error(std::format("--layers {}: preset {} has {} blocks", layers, spec.preset, all));
  for (MetaEntry& e : spec.hparams) {
    if (e.key == "block_count") e.value = layers;
    if (e.key == "rope.dimension_sections") continue;
    if (!std::holds_alternative<std::uint32_t>(e.value) && !std::holds_alternative<std::int32_t>(e.value) &&
        !std::holds_alternative<float>(e.value) && !std::holds_alternative<bool>(e.value) &&
        !std::holds_alternative<std::string>(e.value) && !std::holds_alternative<std::vector<std::string>>(e.value)) {
      throw std::runtime_error(std::format("--layers: preset {} has per-layer parameters ({})", spec.preset, e.key));
    }
  }
  std::erase_if(spec.tensors, [layers](const TensorSpec& t) {
    const auto block = block_of(t.name);
    return block && *block >= layers;
  });
  spec.display_name += std::format(", first {} of {} blocks", layers, all);
}

// A block adds its attention (or state-space) output and its feed-forward output to the residual
// stream; with those projections and their biases zero it adds exactly zero.
void make_inert(ModelSpec& spec, std::uint32_t from) {
  const std::uint32_t all = block_count(spec);
  if (from >= all) throw std::runtime_error(std::format("--inert-from {}: preset {} has {} blocks", from, spec.preset, all));
  for (TensorSpec& t : spec.tensors) {
    const auto block = block_of(t.name);
    if (!block || *block < from) continue;
    for (const char* output : {".attn_output.", ".ffn_down.", ".ssm_out."}) {
      if (t.name.find(output) != std::string::npos) t.init = Constant{0.0f};
    }
  }
  spec.display_name += std::format(", blocks {} to {} inert", from, all - 1);
}

}  // namespace

void generate_model(const GenerateOptions& options) {
  if (options.out_path.empty()) {
    throw std::runtime_error("no output path given for the model file");
  }
  ModelSpec spec = make_spec(options.preset);
  if (options.inert_from > 0) make_inert(spec, options.inert_from);
  if (options.layers > 0) keep_layers(spec, options.layers);
  if (options.lora_rank > 0) {
    spec = make_lora_spec(spec,
                          {.rank = options.lora_rank, .alpha = options.lora_alpha, .targets = options.lora_targets});
  } else if (options.lora_alpha != 0.0f || !options.lora_targets.empty()) {
    throw std::runtime_error("--lora-alpha and --lora-targets need --lora-rank");
  }
  const std::string type_name = options.weight_type.empty() ? spec.default_weight_type : options.weight_type;
  const ggml_type matrix_type = parse_weight_type(type_name);
  if (spec.file_kind == "adapter" && matrix_type != GGML_TYPE_F32 && matrix_type != GGML_TYPE_F16) {
    throw std::runtime_error(std::format("a LoRA adapter is written in f32 or f16, not {}", type_name));
  }

  const auto started = std::chrono::steady_clock::now();
  const std::filesystem::path destination(options.out_path);
  if (destination.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(destination.parent_path(), ec);
    if (ec) {
      throw std::runtime_error(std::format("cannot create directory {}: {}", destination.parent_path().string(),
                                           ec.message()));
    }
  }
  if (!options.quiet) {
    std::fprintf(stderr, "modelgen: generating %s%s (%s, %s weights, seed %llu) into %s\n",
                 spec.file_kind == "adapter" ? "a LoRA adapter for preset " : "preset ", spec.preset.c_str(),
                 spec.architecture.c_str(), type_name.c_str(), static_cast<unsigned long long>(options.seed),
                 options.out_path.c_str());
  }

  const Vocabulary vocab = spec.vocab.size == 0 ? Vocabulary{} : build_vocabulary(spec.vocab);
  TemporaryFile temporary(options.out_path + ".tmp");
  const WriteResult written = write_gguf(spec, vocab, matrix_type, options.seed, temporary.path());
  temporary.commit_as(destination);

  if (!options.quiet) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
    if (spec.file_kind == "adapter") {
      std::fprintf(stderr,
                   "modelgen: wrote %s: %zu LoRA tensor pairs of rank %u, %.3f M parameters, %.2f MiB, %.2f s\n",
                   options.out_path.c_str(), spec.tensors.size() / 2, options.lora_rank,
                   static_cast<double>(written.parameters) / 1e6,
                   static_cast<double>(written.bytes) / (1024.0 * 1024.0), elapsed.count());
    } else {
      std::fprintf(stderr, "modelgen: wrote %s: %.1f M parameters, %.1f MiB, %zu tokens, %zu merges, %.2f s\n",
                   options.out_path.c_str(), static_cast<double>(written.parameters) / 1e6,
                   static_cast<double>(written.bytes) / (1024.0 * 1024.0), vocab.tokens.size(), vocab.merges.size(),
                   elapsed.count());
    }
  }
}

}  // namespace prefixd::modelgen
