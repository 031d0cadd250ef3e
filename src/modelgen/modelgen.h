// prefixd modelgen — writes GGUF model files with random weights and real architecture shapes.
//
// Owns: presets (architecture hyper-parameters and tensor layouts), a deterministic weight
// generator, a byte-level BPE vocabulary with ChatML special tokens, and a ChatML chat template.
// Must not know: llama.h (files are written with gguf.h from libggml), serving, caching.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prefixd::modelgen {

struct PresetInfo {
  std::string name;
  std::string architecture;  // GGUF general.architecture
  std::string summary;       // one line for --help / --list
};

std::vector<PresetInfo> presets();

struct GenerateOptions {
  std::string preset = "tiny";
  std::string out_path;
  std::uint64_t seed = 42;
  std::string weight_type;  // "", "f32", "f16", "q8_0"; "" = the preset's default
  bool quiet = false;
};

// Writes the file (atomically: a temporary file renamed into place). Throws std::runtime_error
// with the reason on an unknown preset, bad option or I/O failure.
void generate_model(const GenerateOptions& options);

}  // namespace prefixd::modelgen
