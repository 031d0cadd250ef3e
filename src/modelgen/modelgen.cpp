// generate_model: resolve options, build the vocabulary, write to a temporary file, rename.
#include "modelgen/modelgen.h"

#include <chrono>
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

}  // namespace

void generate_model(const GenerateOptions& options) {
  if (options.out_path.empty()) {
    throw std::runtime_error("no output path given for the model file");
  }
  const ModelSpec spec = make_spec(options.preset);
  const std::string type_name = options.weight_type.empty() ? spec.default_weight_type : options.weight_type;
  const ggml_type matrix_type = parse_weight_type(type_name);

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
    std::fprintf(stderr, "modelgen: generating preset %s (%s, %s weights, seed %llu) into %s\n",
                 spec.preset.c_str(), spec.architecture.c_str(), type_name.c_str(),
                 static_cast<unsigned long long>(options.seed), options.out_path.c_str());
  }

  const Vocabulary vocab = spec.vocab.size == 0 ? Vocabulary{} : build_vocabulary(spec.vocab);
  TemporaryFile temporary(options.out_path + ".tmp");
  const WriteResult written = write_gguf(spec, vocab, matrix_type, options.seed, temporary.path());
  temporary.commit_as(destination);

  if (!options.quiet) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
    std::fprintf(stderr, "modelgen: wrote %s: %.1f M parameters, %.1f MiB, %zu tokens, %zu merges, %.2f s\n",
                 options.out_path.c_str(), static_cast<double>(written.parameters) / 1e6,
                 static_cast<double>(written.bytes) / (1024.0 * 1024.0), vocab.tokens.size(), vocab.merges.size(),
                 elapsed.count());
  }
}

}  // namespace prefixd::modelgen
