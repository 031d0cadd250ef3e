// modelgen: generated GGUF files are deterministic, have the architecture's real layout, carry a
// ChatML vocabulary and template, and appear atomically. Files are read back with gguf.h only.
#include <ggml-cpp.h>
#include <gguf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <format>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "modelgen/modelgen.h"
#include "modelgen/spec.h"
#include "modelgen/vocab.h"

namespace {

namespace fs = std::filesystem;
using prefixd::modelgen::GenerateOptions;
using prefixd::modelgen::generate_model;

// A fresh directory per test, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            (std::string("prefixd-modelgen-") + info->test_suite_name() + "-" + info->name() + "-" +
             std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  fs::path file(const std::string& name) const { return path_ / name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    std::ranges::sort(names);
    return names;
  }

 private:
  fs::path path_;
};

fs::path generate(const ScratchDir& dir, const std::string& preset, std::uint64_t seed = 42,
                  const std::string& weight_type = "", const std::string& name = "") {
  GenerateOptions options;
  options.preset = preset;
  options.out_path = dir.file(name.empty() ? preset + ".gguf" : name).string();
  options.seed = seed;
  options.weight_type = weight_type;
  options.quiet = true;
  generate_model(options);
  return options.out_path;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A GGUF file read back with its tensor data.
class Gguf {
 public:
  explicit Gguf(const fs::path& path) {
    ggml_context* data = nullptr;
    gguf_.reset(gguf_init_from_file(path.c_str(), {/*no_alloc=*/false, &data}));
    data_.reset(data);
    if (!gguf_) {
      throw std::runtime_error("cannot read GGUF " + path.string());
    }
  }

  std::int64_t key(const std::string& name) const {
    const std::int64_t id = gguf_find_key(gguf_.get(), name.c_str());
    EXPECT_GE(id, 0) << "missing key " << name;
    return id;
  }
  std::string str(const std::string& name) const { return gguf_get_val_str(gguf_.get(), key(name)); }
  std::uint32_t u32(const std::string& name) const { return gguf_get_val_u32(gguf_.get(), key(name)); }
  bool boolean(const std::string& name) const { return gguf_get_val_bool(gguf_.get(), key(name)); }
  float f32(const std::string& name) const { return gguf_get_val_f32(gguf_.get(), key(name)); }

  std::vector<std::string> strings(const std::string& name) const {
    const std::int64_t id = key(name);
    std::vector<std::string> out;
    for (std::size_t i = 0; i < gguf_get_arr_n(gguf_.get(), id); ++i) {
      out.emplace_back(gguf_get_arr_str(gguf_.get(), id, i));
    }
    return out;
  }
  std::vector<std::int32_t> i32s(const std::string& name) const {
    const std::int64_t id = key(name);
    const auto* data = static_cast<const std::int32_t*>(gguf_get_arr_data(gguf_.get(), id));
    return {data, data + gguf_get_arr_n(gguf_.get(), id)};
  }

  std::int64_t tensor_count() const { return gguf_get_n_tensors(gguf_.get()); }
  bool has_tensor(const std::string& name) const { return gguf_find_tensor(gguf_.get(), name.c_str()) >= 0; }

  const ggml_tensor& tensor(const std::string& name) const {
    const ggml_tensor* t = ggml_get_tensor(data_.get(), name.c_str());
    if (t == nullptr) {
      throw std::runtime_error("missing tensor " + name);
    }
    return *t;
  }
  std::vector<std::int64_t> shape(const std::string& name) const {
    const ggml_tensor& t = tensor(name);
    return {t.ne, t.ne + ggml_n_dims(&t)};
  }
  ggml_type type(const std::string& name) const { return tensor(name).type; }
  std::vector<float> f32_values(const std::string& name) const {
    const ggml_tensor& t = tensor(name);
    EXPECT_EQ(t.type, GGML_TYPE_F32) << name;
    const auto* data = static_cast<const float*>(t.data);
    return {data, data + ggml_nelements(&t)};
  }
  std::string raw(const std::string& name) const {
    const ggml_tensor& t = tensor(name);
    return {static_cast<const char*>(t.data), ggml_nbytes(&t)};
  }

 private:
  gguf_context_ptr gguf_;
  ggml_context_ptr data_;
};

using Shape = std::vector<std::int64_t>;

// The shape a spec gives one of its tensors (a failure and no shape when it has none).
Shape spec_shape(const prefixd::modelgen::ModelSpec& spec, const std::string& name) {
  for (const auto& t : spec.tensors) {
    if (t.name == name) return t.ne;
  }
  ADD_FAILURE() << "no " << name;
  return {};
}

TEST(ModelgenPresets, ListsEachPresetWithItsArchitecture) {
  std::set<std::pair<std::string, std::string>> listed;
  for (const auto& preset : prefixd::modelgen::presets()) {
    EXPECT_FALSE(preset.summary.empty()) << preset.name;
    listed.emplace(preset.name, preset.architecture);
  }
  const std::set<std::pair<std::string, std::string>> expected = {
      {"tiny", "qwen2"},           {"qwen2-0.5b", "qwen2"},   {"qwen2-7b", "qwen2"},   {"gemma3-tiny", "gemma3"},
      {"mamba2-tiny", "mamba2"}, {"qwen35-tiny", "qwen35"},   {"qwen35-0.8b", "qwen35"},
      {"tiny-mmproj", "clip"},   {"gemma3-tiny-mmproj", "clip"}, {"tiny256-mmproj", "clip"},
      {"gemma3-4b-mmproj", "clip"},  {"tiny-qwen3vl-mmproj", "clip"}, {"qwen3vl-2b-mmproj", "clip"},
      {"tiny-qwen2a-mmproj", "clip"}, {"tiny128-qwen2a-mmproj", "clip"}, {"qwen2-audio-7b-mmproj", "clip"},
      {"tiny-qwen2vl", "qwen2vl"},    {"qwen2vl-7b", "qwen2vl"},
      {"tiny-qwen3vl", "qwen3vl"},    {"qwen3vl-2b", "qwen3vl"},
      {"tiny-qwen2vl-mmproj", "clip"}, {"tiny128-qwen2vl-mmproj", "clip"}, {"qwen2vl-7b-mmproj", "clip"},
      {"tiny-qwen25vl-mmproj", "clip"}, {"qwen25vl-7b-mmproj", "clip"},
      {"tiny-embed", "qwen3"},        {"qwen3-embed-0.6b", "qwen3"}, {"tiny-qwen3-reranker", "qwen3"},
      {"tiny-bert", "bert"},          {"tiny-bert-reranker", "bert"},
  };
  EXPECT_EQ(listed, expected);
}

// A projector's shapes must agree with each other and with its text model, or libmtmd refuses it
// at load (output width) or computes garbage (position rows): checked on the spec.
TEST(ModelgenPresets, ProjectorsProjectIntoTheirTextModelAndHaveAPositionPerPatch) {
  const struct {
    const char* projector;
    std::int64_t text_embd;
    std::int64_t patches;
    const char* output;  // the tensor whose shape gives the output width
    int output_dim;
  } cases[] = {{"tiny-mmproj", 64, 16 * 16, "mm.input_projection.weight", 0},
               {"gemma3-tiny-mmproj", 128, 16 * 16, "mm.input_projection.weight", 0},
               {"tiny256-mmproj", 256, 16 * 16, "mm.input_projection.weight", 0},
               {"gemma3-4b-mmproj", 2560, 64 * 64, "mm.input_projection.weight", 0},
               {"tiny-qwen3vl-mmproj", 64, 16 * 16, "mm.2.weight", 1},
               {"qwen3vl-2b-mmproj", 2048, 48 * 48, "mm.2.weight", 1}};
  for (const auto& c : cases) {
    const auto spec = prefixd::modelgen::make_spec(c.projector);
    EXPECT_EQ(spec.file_kind, "mmproj");
    EXPECT_EQ(spec.vocab.size, 0u);
    const auto tensor = [&](const std::string& name) {
      for (const auto& t : spec.tensors) {
        if (t.name == name) return t;
      }
      ADD_FAILURE() << c.projector << " has no " << name;
      return prefixd::modelgen::TensorSpec{};
    };
    EXPECT_EQ(tensor(c.output).ne.at(static_cast<size_t>(c.output_dim)), c.text_embd) << c.projector;
    EXPECT_EQ(tensor("v.position_embd.weight").ne.at(1), c.patches) << c.projector;
    EXPECT_EQ(tensor("v.position_embd.weight").storage, prefixd::modelgen::StorageClass::f32) << c.projector;
  }
}

// Qwen2-VL's and Qwen2.5-VL's towers as libmtmd's qwen2vl graph takes them: two 14-pixel patch
// kernels summed, no patch bias and no position table (the graph asserts the bias away; positions
// are rotary), separate Q/K/V with biases, the 2×2 merger MLP into the text width; Qwen2.5-VL
// adds a gated FFN, RMS norms (no norm biases) and the window-attention pattern libmtmd requires.
TEST(ModelgenPresets, QwenVlProjectorsHaveTheShapesTheQwen2VlGraphTakes) {
  const struct {
    const char* projector;
    const char* type;
    std::int64_t n_embd, n_ff, n_layer, text_embd;
    std::uint32_t n_wa_pattern;  // 0: Qwen2-VL (no window attention)
  } cases[] = {{"tiny-qwen2vl-mmproj", "qwen2vl_merger", 64, 128, 2, 64, 0},
               {"tiny128-qwen2vl-mmproj", "qwen2vl_merger", 64, 128, 2, 128, 0},
               {"qwen2vl-7b-mmproj", "qwen2vl_merger", 1280, 5120, 32, 3584, 0},
               {"tiny-qwen25vl-mmproj", "qwen2.5vl_merger", 64, 128, 2, 64, 2},
               {"qwen25vl-7b-mmproj", "qwen2.5vl_merger", 1280, 3420, 32, 3584, 8}};
  for (const auto& c : cases) {
    const auto spec = prefixd::modelgen::make_spec(c.projector);
    EXPECT_EQ(spec.file_kind, "mmproj") << c.projector;
    EXPECT_EQ(spec.default_weight_type, "f16") << c.projector;
    const auto find = [&](const std::string& name) -> const prefixd::modelgen::TensorSpec* {
      for (const auto& t : spec.tensors) {
        if (t.name == name) return &t;
      }
      return nullptr;
    };
    const auto shape = [&](const std::string& name) {
      const auto* t = find(name);
      EXPECT_NE(t, nullptr) << c.projector << " has no " << name;
      return t != nullptr ? t->ne : Shape{};
    };
    const auto hparam = [&](const std::string& key) -> const prefixd::modelgen::MetaValue* {
      for (const auto& e : spec.hparams) {
        if (e.key == key) return &e.value;
      }
      return nullptr;
    };
    ASSERT_NE(hparam("projector_type"), nullptr);
    EXPECT_EQ(std::get<std::string>(*hparam("projector_type")), c.type);
    EXPECT_EQ(std::get<std::uint32_t>(*hparam("vision.patch_size")), 14u) << c.projector;
    EXPECT_EQ(std::get<std::uint32_t>(*hparam("vision.projection_dim")), c.text_embd) << c.projector;
    EXPECT_EQ(std::get<std::uint32_t>(*hparam("vision.block_count")), c.n_layer) << c.projector;
    const std::int64_t n = c.n_embd;
    EXPECT_EQ(shape("v.patch_embd.weight"), (Shape{14, 14, 3, n})) << c.projector;
    EXPECT_EQ(shape("v.patch_embd.weight.1"), (Shape{14, 14, 3, n})) << c.projector;
    EXPECT_EQ(find("v.patch_embd.bias"), nullptr) << c.projector;
    EXPECT_EQ(find("v.position_embd.weight"), nullptr) << c.projector;
    const std::string last = std::format("v.blk.{}.", c.n_layer - 1);
    EXPECT_EQ(find(std::format("v.blk.{}.ln1.weight", c.n_layer)), nullptr) << c.projector;
    for (const char* proj : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      EXPECT_EQ(shape(last + proj + ".weight"), (Shape{n, n})) << c.projector << " " << proj;
      EXPECT_EQ(shape(last + proj + ".bias"), (Shape{n})) << c.projector << " " << proj;
    }
    EXPECT_EQ(find(last + "attn_qkv.weight"), nullptr) << c.projector;
    EXPECT_EQ(shape(last + "ffn_up.weight"), (Shape{n, c.n_ff})) << c.projector;
    // libmtmd swaps up and down of an FFN whose down projection starts at n_embd.
    EXPECT_EQ(shape(last + "ffn_down.weight"), (Shape{c.n_ff, n})) << c.projector;
    EXPECT_NE(c.n_ff, n) << c.projector;
    EXPECT_EQ(shape("mm.0.weight"), (Shape{4 * n, 4 * n})) << c.projector;
    EXPECT_EQ(shape("mm.0.bias"), (Shape{4 * n})) << c.projector;
    EXPECT_EQ(shape("mm.2.weight"), (Shape{4 * n, c.text_embd})) << c.projector;
    EXPECT_EQ(shape("mm.2.bias"), (Shape{c.text_embd})) << c.projector;
    EXPECT_EQ(shape("v.post_ln.weight"), (Shape{n})) << c.projector;
    if (c.n_wa_pattern == 0) {  // Qwen2-VL: LayerNorms with biases, quick-GELU MLP
      EXPECT_EQ(find(last + "ffn_gate.weight"), nullptr) << c.projector;
      EXPECT_NE(find(last + "ln1.bias"), nullptr) << c.projector;
      EXPECT_NE(find("v.post_ln.bias"), nullptr) << c.projector;
      EXPECT_EQ(hparam("vision.n_wa_pattern"), nullptr) << c.projector;
      EXPECT_EQ(hparam("use_silu"), nullptr) << c.projector;
      EXPECT_EQ(hparam("use_gelu"), nullptr) << c.projector;
    } else {  // Qwen2.5-VL: RMS norms, gated SiLU MLP, window attention
      EXPECT_EQ(shape(last + "ffn_gate.weight"), (Shape{n, c.n_ff})) << c.projector;
      EXPECT_EQ(shape(last + "ffn_gate.bias"), (Shape{c.n_ff})) << c.projector;
      EXPECT_EQ(find(last + "ln1.bias"), nullptr) << c.projector;
      EXPECT_EQ(find("v.post_ln.bias"), nullptr) << c.projector;
      ASSERT_NE(hparam("vision.n_wa_pattern"), nullptr) << c.projector;
      EXPECT_EQ(std::get<std::uint32_t>(*hparam("vision.n_wa_pattern")), c.n_wa_pattern) << c.projector;
      ASSERT_NE(hparam("use_silu"), nullptr) << c.projector;
      EXPECT_TRUE(std::get<bool>(*hparam("use_silu"))) << c.projector;
    }
  }
  // The 7B towers' sizes: Qwen2-VL-7B's and Qwen2.5-VL-7B's vision parts are about 675 M parameters.
  for (const char* projector : {"qwen2vl-7b-mmproj", "qwen25vl-7b-mmproj"}) {
    std::int64_t parameters = 0;
    for (const auto& t : prefixd::modelgen::make_spec(projector).tensors) parameters += t.element_count();
    EXPECT_NEAR(static_cast<double>(parameters), 6.75e8, 0.01e9) << projector;
  }
}

// A Qwen3-VL projector emits, per image token, its merger's output and one more of the same width
// per deepstack merger (v.deepstack.N.*, after vision block N); libmtmd refuses it unless that
// is the text model's input width, n_embd × (1 + qwen3vl.n_deepstack_layers). Checked on the
// specs: qwen3vl-2b's files are about 2.8 GB together.
TEST(ModelgenPresets, Qwen3VlProjectorsFillTheInputWidthOfTheirTextModels) {
  const struct {
    const char* model;
    const char* projector;
    std::int64_t n_embd, vision_embd;
    std::vector<int> deepstack;  // the vision blocks with a deepstack merger
  } cases[] = {{"tiny-qwen3vl", "tiny-qwen3vl-mmproj", 64, 64, {}},
               {"qwen3vl-2b", "qwen3vl-2b-mmproj", 2048, 1024, {5, 11, 17}}};
  for (const auto& c : cases) {
    const auto model = prefixd::modelgen::make_spec(c.model);
    const auto projector = prefixd::modelgen::make_spec(c.projector);
    const auto hparam = [](const prefixd::modelgen::ModelSpec& spec, const std::string& key) {
      for (const auto& e : spec.hparams) {
        if (e.key == key) return std::get<std::uint32_t>(e.value);
      }
      ADD_FAILURE() << spec.preset << " has no " << key;
      return 0u;
    };
    EXPECT_EQ(std::get<std::string>(projector.hparams.front().value), "qwen3vl_merger") << c.projector;
    std::vector<int> mergers;
    for (int il = 0; il < static_cast<int>(hparam(projector, "vision.block_count")); ++il) {
      const std::string fc1 = std::format("v.deepstack.{}.fc1.weight", il);
      if (std::ranges::any_of(projector.tensors, [&](const auto& t) { return t.name == fc1; })) mergers.push_back(il);
    }
    EXPECT_EQ(mergers, c.deepstack) << c.projector;
    const std::int64_t n_deepstack = hparam(model, "n_deepstack_layers");
    EXPECT_EQ(n_deepstack, static_cast<std::int64_t>(c.deepstack.size())) << c.model;
    EXPECT_EQ(hparam(model, "embedding_length"), c.n_embd) << c.model;
    EXPECT_EQ(hparam(projector, "vision.projection_dim"), c.n_embd) << c.projector;
    // libmtmd's output width: the merger's output bias times (1 + the deepstack mergers).
    const std::int64_t output = spec_shape(projector, "mm.2.bias").at(0) * (1 + static_cast<std::int64_t>(mergers.size()));
    EXPECT_EQ(output, c.n_embd * (1 + n_deepstack)) << c.projector;
    const std::int64_t merged = 4 * c.vision_embd;  // 2×2 patches
    for (const int il : c.deepstack) {
      const auto ds = [il](const char* what) { return std::format("v.deepstack.{}.{}", il, what); };
      EXPECT_EQ(spec_shape(projector, ds("norm.weight")), (Shape{merged})) << c.projector;
      EXPECT_EQ(spec_shape(projector, ds("norm.bias")), (Shape{merged})) << c.projector;
      EXPECT_EQ(spec_shape(projector, ds("fc1.weight")), (Shape{merged, merged})) << c.projector;
      EXPECT_EQ(spec_shape(projector, ds("fc1.bias")), (Shape{merged})) << c.projector;
      EXPECT_EQ(spec_shape(projector, ds("fc2.weight")), (Shape{merged, c.n_embd})) << c.projector;
      EXPECT_EQ(spec_shape(projector, ds("fc2.bias")), (Shape{c.n_embd})) << c.projector;
    }
  }
  // Qwen3-VL-2B's vision part: the tower and merger (331.4 M) and three deepstack mergers of 25.2 M.
  std::int64_t parameters = 0;
  for (const auto& t : prefixd::modelgen::make_spec("qwen3vl-2b-mmproj").tensors) parameters += t.element_count();
  EXPECT_EQ(parameters, 331379712 + 3 * 25192448);
}

// An audio projector's shapes as libmtmd's Whisper encoder asserts them: convolution biases that
// broadcast over frames ([1, n]), 1500 positions per 30-second window, no bias on K, and a
// projection into the text model's width.
TEST(ModelgenPresets, AudioProjectorsHaveTheShapesTheWhisperEncoderAsserts) {
  const struct {
    const char* projector;
    std::int64_t n_embd;
    std::int64_t text_embd;
  } cases[] = {{"tiny-qwen2a-mmproj", 64, 64}, {"tiny128-qwen2a-mmproj", 64, 128}, {"qwen2-audio-7b-mmproj", 1280, 4096}};
  for (const auto& c : cases) {
    const auto spec = prefixd::modelgen::make_spec(c.projector);
    EXPECT_EQ(spec.file_kind, "mmproj");
    const auto find = [&](const std::string& name) -> const prefixd::modelgen::TensorSpec* {
      for (const auto& t : spec.tensors) {
        if (t.name == name) return &t;
      }
      return nullptr;
    };
    ASSERT_NE(find("a.conv1d.1.bias"), nullptr) << c.projector;
    EXPECT_EQ(find("a.conv1d.1.bias")->ne, (std::vector<std::int64_t>{1, c.n_embd})) << c.projector;
    EXPECT_EQ(find("a.conv1d.1.weight")->ne, (std::vector<std::int64_t>{3, 128, c.n_embd})) << c.projector;
    EXPECT_EQ(find("a.position_embd.weight")->ne, (std::vector<std::int64_t>{c.n_embd, 1500})) << c.projector;
    EXPECT_NE(find("a.blk.0.attn_q.bias"), nullptr) << c.projector;
    EXPECT_EQ(find("a.blk.0.attn_k.bias"), nullptr) << c.projector << ": the encoder asserts K has no bias";
    ASSERT_NE(find("mm.a.fc.weight"), nullptr) << c.projector;
    EXPECT_EQ(find("mm.a.fc.weight")->ne.at(1), c.text_embd) << c.projector;
  }
}

TEST(ModelgenDeterminism, SameSeedGivesByteIdenticalFiles) {
  const ScratchDir dir;
  const auto a = generate(dir, "tiny", 7, "", "a.gguf");
  const auto b = generate(dir, "tiny", 7, "", "b.gguf");
  const std::string bytes = read_bytes(a);
  EXPECT_GT(bytes.size(), 1000u);
  EXPECT_TRUE(bytes == read_bytes(b)) << "two runs with seed 7 differ";
}

TEST(ModelgenDeterminism, DifferentSeedsGiveDifferentWeightsButTheSameVocabulary) {
  const ScratchDir dir;
  const Gguf a(generate(dir, "tiny", 1, "", "a.gguf"));
  const Gguf b(generate(dir, "tiny", 2, "", "b.gguf"));
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.1.ffn_down.weight", "output.weight"}) {
    EXPECT_NE(a.raw(name), b.raw(name)) << name;
  }
  EXPECT_EQ(a.raw("blk.0.attn_norm.weight"), b.raw("blk.0.attn_norm.weight"));  // constant ones
  EXPECT_EQ(a.strings("tokenizer.ggml.tokens"), b.strings("tokenizer.ggml.tokens"));
  EXPECT_EQ(a.strings("tokenizer.ggml.merges"), b.strings("tokenizer.ggml.merges"));
}

// A drafter pair from one seed: the first blocks alone, and the whole model whose later blocks
// add nothing. Both share the vocabulary, embeddings, head and first blocks byte for byte.
TEST(ModelgenOptions, LayersAndInertBlocksMakeADrafterPairFromOneSeed) {
  const ScratchDir dir;
  GenerateOptions first;
  first.preset = "tiny";
  first.out_path = dir.file("first.gguf").string();
  first.layers = 1;
  first.quiet = true;
  generate_model(first);
  GenerateOptions inert = first;
  inert.out_path = dir.file("inert.gguf").string();
  inert.layers = 0;
  inert.inert_from = 1;
  generate_model(inert);
  const Gguf full(generate(dir, "tiny"));
  const Gguf drafter(first.out_path);
  const Gguf target(inert.out_path);
  EXPECT_EQ(drafter.u32("qwen2.block_count"), 1u);
  EXPECT_EQ(target.u32("qwen2.block_count"), 2u);
  EXPECT_FALSE(drafter.has_tensor("blk.1.attn_q.weight"));
  for (const char* name : {"token_embd.weight", "output.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight"}) {
    EXPECT_EQ(drafter.raw(name), full.raw(name)) << name;
    EXPECT_EQ(target.raw(name), full.raw(name)) << name;
  }
  EXPECT_EQ(target.raw("blk.1.attn_q.weight"), full.raw("blk.1.attn_q.weight"));  // still computed
  for (const char* name : {"blk.1.attn_output.weight", "blk.1.ffn_down.weight"}) {
    for (const float v : target.f32_values(name)) ASSERT_EQ(v, 0.0f) << name;
  }
  EXPECT_EQ(drafter.strings("tokenizer.ggml.tokens"), full.strings("tokenizer.ggml.tokens"));
  GenerateOptions too_many = first;
  too_many.layers = 3;
  EXPECT_THROW(generate_model(too_many), std::runtime_error);
  // M-RoPE's sections describe the whole model: an M-RoPE model is cut like any other.
  GenerateOptions mrope = first;
  mrope.preset = "tiny-qwen2vl";
  mrope.out_path = dir.file("mrope.gguf").string();
  generate_model(mrope);
  EXPECT_EQ(Gguf(mrope.out_path).u32("qwen2vl.block_count"), 1u);
}

TEST(ModelgenWeights, LinearWeightsHaveVarianceOneOverFanInAndNormsAreOnes) {
  const ScratchDir dir;
  const Gguf g(generate(dir, "tiny"));
  // Linear weights are drawn with standard deviation 1/sqrt(fan_in) = 1/8 for a 64-wide model.
  const auto w = g.f32_values("blk.0.attn_q.weight");
  double sum = 0, sum_sq = 0;
  for (const float v : w) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double mean = sum / static_cast<double>(w.size());
  const double stddev = std::sqrt(sum_sq / static_cast<double>(w.size()) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(stddev, 0.125, 0.01);
  for (const float v : g.f32_values("output_norm.weight")) {
    EXPECT_EQ(v, 1.0f);
  }
}

TEST(ModelgenOptions, UnknownPresetThrowsNamingTheKnownOnes) {
  const ScratchDir dir;
  try {
    generate(dir, "no-such-model");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model preset 'no-such-model'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("qwen2-0.5b"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(ModelgenOptions, UnknownWeightTypeThrows) {
  const ScratchDir dir;
  EXPECT_THROW(generate(dir, "tiny", 42, "q4_k"), std::runtime_error);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(ModelgenOptions, EmptyOutputPathThrows) {
  GenerateOptions options;
  options.quiet = true;
  EXPECT_THROW(generate_model(options), std::runtime_error);
}

TEST(ModelgenGguf, TinyIsAQwen2ModelWithASeparateOutputHead) {
  const ScratchDir dir;
  const Gguf g(generate(dir, "tiny"));
  EXPECT_EQ(g.str("general.architecture"), "qwen2");
  EXPECT_EQ(g.u32("qwen2.block_count"), 2u);
  EXPECT_EQ(g.u32("qwen2.embedding_length"), 64u);
  EXPECT_EQ(g.u32("qwen2.feed_forward_length"), 128u);
  EXPECT_EQ(g.u32("qwen2.attention.head_count"), 4u);
  EXPECT_EQ(g.u32("qwen2.attention.head_count_kv"), 2u);
  EXPECT_EQ(g.u32("qwen2.context_length"), 4096u);
  EXPECT_EQ(g.tensor_count(), 3 + 2 * 12);
  EXPECT_EQ(g.shape("token_embd.weight"), (Shape{64, 4096}));
  EXPECT_EQ(g.shape("output.weight"), (Shape{64, 4096}));
  EXPECT_EQ(g.shape("blk.1.attn_k.weight"), (Shape{64, 32}));  // 2 KV heads of 16
  EXPECT_EQ(g.shape("blk.1.attn_k.bias"), (Shape{32}));
  EXPECT_EQ(g.shape("blk.0.ffn_down.weight"), (Shape{128, 64}));
  EXPECT_EQ(g.type("blk.0.ffn_down.weight"), GGML_TYPE_F32);
}

TEST(ModelgenGguf, Qwen2WeightTypeOverrideQuantizesOnlyLinearWeights) {
  const ScratchDir dir;
  const Gguf g(generate(dir, "tiny", 42, "q8_0"));
  EXPECT_EQ(g.type("token_embd.weight"), GGML_TYPE_Q8_0);
  EXPECT_EQ(g.type("blk.0.attn_q.weight"), GGML_TYPE_Q8_0);
  EXPECT_EQ(g.type("blk.0.attn_q.bias"), GGML_TYPE_F32);
  EXPECT_EQ(g.type("blk.0.attn_norm.weight"), GGML_TYPE_F32);
  EXPECT_EQ(g.u32("general.file_type"), 7u);  // LLAMA_FTYPE_MOSTLY_Q8_0
}

TEST(ModelgenGguf, Gemma3TinyHasFiveSlidingWindowLayersPerGlobalOne) {
  const ScratchDir dir;
  const Gguf g(generate(dir, "gemma3-tiny"));
  EXPECT_EQ(g.str("general.architecture"), "gemma3");
  EXPECT_EQ(g.u32("gemma3.block_count"), 6u);  // llama.cpp's Gemma 3 pattern: 5 local + 1 global
  EXPECT_EQ(g.u32("gemma3.attention.sliding_window"), 64u);
  EXPECT_EQ(g.u32("gemma3.attention.key_length"), 32u);
  EXPECT_EQ(g.tensor_count(), 2 + 6 * 13);
  EXPECT_FALSE(g.has_tensor("output.weight"));  // tied to token_embd
  EXPECT_EQ(g.shape("blk.5.attn_q_norm.weight"), (Shape{32}));
  EXPECT_EQ(g.shape("blk.5.attn_v.weight"), (Shape{128, 64}));
  EXPECT_EQ(g.type("blk.5.attn_v.weight"), GGML_TYPE_F16);
  EXPECT_EQ(g.type("blk.5.post_ffw_norm.weight"), GGML_TYPE_F32);
}

TEST(ModelgenGguf, Mamba2TinyHasAStableRecurrence) {
  const ScratchDir dir;
  const Gguf g(generate(dir, "mamba2-tiny"));
  EXPECT_EQ(g.str("general.architecture"), "mamba2");
  EXPECT_EQ(g.u32("mamba2.ssm.inner_size"), 256u);
  EXPECT_EQ(g.u32("mamba2.ssm.state_size"), 64u);
  EXPECT_EQ(g.u32("mamba2.ssm.time_step_rank"), 4u);
  EXPECT_EQ(g.tensor_count(), 3 + 4 * 9);
  // in_proj: z and x (256 each), B and C (64 each, one group), dt (one per head).
  EXPECT_EQ(g.shape("blk.0.ssm_in.weight"), (Shape{128, 2 * 256 + 2 * 64 + 4}));
  EXPECT_EQ(g.shape("blk.0.ssm_conv1d.weight"), (Shape{4, 256 + 2 * 64}));
  EXPECT_EQ(g.shape("blk.0.ssm_a"), (Shape{1, 4}));
  for (const float a : g.f32_values("blk.3.ssm_a")) {
    EXPECT_LT(a, 0.0f);  // exp(dt * A) must decay
  }
  for (const float d : g.f32_values("blk.3.ssm_d")) {
    EXPECT_EQ(d, 1.0f);
  }
  for (const float bias : g.f32_values("blk.3.ssm_dt.bias")) {
    const float dt = std::log1p(std::exp(bias));  // softplus
    EXPECT_GE(dt, 0.9e-3f);
    EXPECT_LE(dt, 0.11f);
  }
}

TEST(ModelgenGguf, Qwen35TinyPutsOneAttentionLayerAfterThreeDeltaNetLayers) {
  const ScratchDir dir;
  const Gguf g(generate(dir, "qwen35-tiny"));
  EXPECT_EQ(g.str("general.architecture"), "qwen35");
  EXPECT_EQ(g.u32("qwen35.full_attention_interval"), 4u);
  EXPECT_EQ(g.i32s("qwen35.rope.dimension_sections"), (std::vector<std::int32_t>{3, 3, 2, 0}));
  EXPECT_EQ(g.tensor_count(), 2 + 3 * 14 + 11);
  for (const char* layer : {"blk.0.", "blk.1.", "blk.2."}) {
    EXPECT_TRUE(g.has_tensor(std::string(layer) + "ssm_a")) << layer;
    EXPECT_FALSE(g.has_tensor(std::string(layer) + "attn_q.weight")) << layer;
  }
  EXPECT_FALSE(g.has_tensor("blk.3.ssm_a"));
  EXPECT_EQ(g.shape("blk.3.attn_q.weight"), (Shape{128, 2 * 4 * 64}));  // queries + output gate
  EXPECT_EQ(g.shape("blk.0.attn_qkv.weight"), (Shape{128, 2 * 64 + 128}));
  EXPECT_EQ(g.shape("blk.0.ssm_conv1d.weight"), (Shape{4, 2 * 64 + 128}));
}

// `tiny` as a Qwen2-VL text model: tiny's tensors, vocabulary and template, plus the M-RoPE
// sections that make llama.cpp give image tokens (t, y, x) positions.
TEST(ModelgenGguf, TinyQwen2vlIsTinyWithMRopeSections) {
  const ScratchDir dir;
  const Gguf g(generate(dir, "tiny-qwen2vl"));
  const Gguf tiny(generate(dir, "tiny"));
  EXPECT_EQ(g.str("general.architecture"), "qwen2vl");
  EXPECT_EQ(g.u32("qwen2vl.embedding_length"), 64u);
  EXPECT_EQ(g.u32("qwen2vl.attention.head_count"), 4u);
  // Heads of 16: 8 frequency pairs, all of them in the sections.
  EXPECT_EQ(g.i32s("qwen2vl.rope.dimension_sections"), (std::vector<std::int32_t>{2, 3, 3, 0}));
  EXPECT_EQ(g.tensor_count(), tiny.tensor_count());
  EXPECT_EQ(g.shape("blk.1.attn_k.bias"), (Shape{32}));
  EXPECT_EQ(g.raw("blk.1.attn_q.weight"), tiny.raw("blk.1.attn_q.weight"));  // seeded by name
  EXPECT_EQ(g.strings("tokenizer.ggml.tokens"), tiny.strings("tokenizer.ggml.tokens"));
  EXPECT_EQ(g.strings("tokenizer.ggml.merges"), tiny.strings("tokenizer.ggml.merges"));
  EXPECT_EQ(g.str("tokenizer.chat_template"), tiny.str("tokenizer.chat_template"));
}

// `tiny` as a Qwen3-VL text model: tiny's width, heads, vocabulary and template in Qwen3's layout
// (no Q/K/V biases, an RMS norm per query and key head), the interleaved M-RoPE sections and no
// deepstack layers (tiny-qwen3vl-mmproj has no deepstack mergers).
TEST(ModelgenGguf, TinyQwen3vlSharesTinysVocabularyInQwen3sLayout) {
  const ScratchDir dir;
  const Gguf g(generate(dir, "tiny-qwen3vl"));
  const Gguf tiny(generate(dir, "tiny"));
  EXPECT_EQ(g.str("general.architecture"), "qwen3vl");
  EXPECT_EQ(g.u32("qwen3vl.embedding_length"), 64u);
  EXPECT_EQ(g.u32("qwen3vl.block_count"), 2u);
  EXPECT_EQ(g.u32("qwen3vl.attention.head_count"), 4u);
  EXPECT_EQ(g.u32("qwen3vl.attention.head_count_kv"), 2u);
  EXPECT_EQ(g.u32("qwen3vl.attention.key_length"), 16u);
  EXPECT_EQ(g.u32("qwen3vl.n_deepstack_layers"), 0u);
  EXPECT_EQ(g.f32("qwen3vl.rope.freq_base"), 5000000.0f);
  // Heads of 16: 8 frequency pairs, all of them in the sections.
  EXPECT_EQ(g.i32s("qwen3vl.rope.dimension_sections"), (std::vector<std::int32_t>{3, 3, 2, 0}));
  EXPECT_EQ(g.tensor_count(), 3 + 2 * 11);  // its own output head, as tiny
  EXPECT_EQ(g.shape("output.weight"), (Shape{64, 4096}));
  EXPECT_EQ(g.shape("blk.1.attn_q_norm.weight"), (Shape{16}));
  EXPECT_EQ(g.shape("blk.1.attn_k_norm.weight"), (Shape{16}));
  EXPECT_EQ(g.shape("blk.1.attn_k.weight"), (Shape{64, 32}));
  EXPECT_FALSE(g.has_tensor("blk.1.attn_q.bias"));
  EXPECT_FALSE(g.has_tensor("blk.1.attn_k.bias"));
  EXPECT_FALSE(g.has_tensor("blk.1.attn_v.bias"));
  EXPECT_EQ(g.raw("token_embd.weight"), tiny.raw("token_embd.weight"));  // seeded by name
  EXPECT_EQ(g.strings("tokenizer.ggml.tokens"), tiny.strings("tokenizer.ggml.tokens"));
  EXPECT_EQ(g.strings("tokenizer.ggml.merges"), tiny.strings("tokenizer.ggml.merges"));
  EXPECT_EQ(g.str("tokenizer.chat_template"), tiny.str("tokenizer.chat_template"));
}

// Qwen3-VL-2B-Instruct's text model, checked on the spec (the file is about 1.8 GB): Qwen3's
// layout at 2048 wide, 16 query / 8 KV heads of 128 (so the query width is 2048 and the KV width
// 1024), the interleaved M-RoPE sections [24, 20, 20, 0] of a head's 64 frequency pairs, three
// deepstack layers, a tied head.
TEST(ModelgenPresets, Qwen3vl_2bHasTheQwen3Vl2bTextShapes) {
  const auto spec = prefixd::modelgen::make_spec("qwen3vl-2b");
  EXPECT_EQ(spec.architecture, "qwen3vl");
  EXPECT_EQ(spec.default_weight_type, "q8_0");
  EXPECT_EQ(spec.vocab.size, 151936u);
  EXPECT_EQ(spec.vocab.n_regular, 151643u);
  const auto hparam = [&](const std::string& key) -> prefixd::modelgen::MetaValue {
    for (const auto& e : spec.hparams) {
      if (e.key == key) return e.value;
    }
    ADD_FAILURE() << "no " << key;
    return std::uint32_t{0};
  };
  using prefixd::modelgen::MetaValue;
  EXPECT_EQ(hparam("embedding_length"), MetaValue(2048u));
  EXPECT_EQ(hparam("block_count"), MetaValue(28u));
  EXPECT_EQ(hparam("feed_forward_length"), MetaValue(6144u));
  EXPECT_EQ(hparam("attention.head_count"), MetaValue(16u));
  EXPECT_EQ(hparam("attention.head_count_kv"), MetaValue(8u));
  EXPECT_EQ(hparam("attention.key_length"), MetaValue(128u));
  EXPECT_EQ(hparam("attention.value_length"), MetaValue(128u));
  EXPECT_EQ(hparam("context_length"), MetaValue(262144u));
  EXPECT_EQ(hparam("rope.freq_base"), MetaValue(5000000.0f));
  EXPECT_EQ(hparam("attention.layer_norm_rms_epsilon"), MetaValue(1e-6f));
  EXPECT_EQ(hparam("rope.dimension_sections"), MetaValue(std::vector<std::int32_t>{24, 20, 20, 0}));
  EXPECT_EQ(hparam("n_deepstack_layers"), MetaValue(3u));
  const auto shape = [&](const std::string& name) { return spec_shape(spec, name); };
  EXPECT_EQ(shape("token_embd.weight"), (Shape{2048, 151936}));
  EXPECT_EQ(shape("blk.27.attn_q.weight"), (Shape{2048, 16 * 128}));
  EXPECT_EQ(shape("blk.27.attn_k.weight"), (Shape{2048, 8 * 128}));
  EXPECT_EQ(shape("blk.27.attn_v.weight"), (Shape{2048, 8 * 128}));
  EXPECT_EQ(shape("blk.27.attn_q_norm.weight"), (Shape{128}));
  EXPECT_EQ(shape("blk.27.attn_output.weight"), (Shape{16 * 128, 2048}));
  EXPECT_EQ(shape("blk.27.ffn_down.weight"), (Shape{6144, 2048}));
  EXPECT_EQ(spec.tensors.size(), 2u + 28 * 11);  // tied head: no output.weight, no biases
  std::int64_t parameters = 0;
  for (const auto& t : spec.tensors) parameters += t.element_count();
  EXPECT_EQ(parameters, 1720574976);  // 2048 × 151936 embeddings, 28 blocks of 50.3 M, the output norm
}

// The GPU benchmark's model is checked on its spec only: writing it takes about 8 GB.
TEST(ModelgenPresets, Qwen2_7bHasTheQwen2_7bShapes) {
  const auto spec = prefixd::modelgen::make_spec("qwen2-7b");
  EXPECT_EQ(spec.architecture, "qwen2");
  EXPECT_EQ(spec.default_weight_type, "q8_0");
  EXPECT_EQ(spec.vocab.size, 152064u);
  const auto shape = [&](const std::string& name) { return spec_shape(spec, name); };
  EXPECT_EQ(shape("token_embd.weight"), (Shape{3584, 152064}));
  EXPECT_EQ(shape("output.weight"), (Shape{3584, 152064}));
  EXPECT_EQ(shape("blk.27.attn_k.weight"), (Shape{3584, 4 * 128}));
  EXPECT_EQ(shape("blk.27.ffn_down.weight"), (Shape{18944, 3584}));
  std::int64_t parameters = 0;
  for (const auto& t : spec.tensors) {
    std::int64_t n = 1;
    for (const auto d : t.ne) n *= d;
    parameters += n;
  }
  EXPECT_NEAR(static_cast<double>(parameters), 7.62e9, 0.01e9);  // Qwen2.5-7B's 7.62 billion
}

// Qwen2-VL-7B's text model: Qwen2.5-7B's shapes (checked on the spec: the file is about 8 GB)
// with Qwen2-VL's M-RoPE sections, [16, 24, 24, 0] of a 128-wide head's 64 frequency pairs.
TEST(ModelgenPresets, Qwen2vl_7bHasTheQwen2Vl7bTextShapes) {
  const auto spec = prefixd::modelgen::make_spec("qwen2vl-7b");
  EXPECT_EQ(spec.architecture, "qwen2vl");
  EXPECT_EQ(spec.default_weight_type, "q8_0");
  EXPECT_EQ(spec.vocab.size, 152064u);
  const auto shape = [&](const std::string& name) { return spec_shape(spec, name); };
  EXPECT_EQ(shape("token_embd.weight"), (Shape{3584, 152064}));
  EXPECT_EQ(shape("output.weight"), (Shape{3584, 152064}));
  EXPECT_EQ(shape("blk.27.attn_q.bias"), (Shape{3584}));
  EXPECT_EQ(shape("blk.27.attn_k.weight"), (Shape{3584, 4 * 128}));
  EXPECT_EQ(shape("blk.27.ffn_down.weight"), (Shape{18944, 3584}));
  const auto hparam = [&](const std::string& key) -> prefixd::modelgen::MetaValue {
    for (const auto& e : spec.hparams) {
      if (e.key == key) return e.value;
    }
    ADD_FAILURE() << "no " << key;
    return std::uint32_t{0};
  };
  EXPECT_EQ(hparam("rope.dimension_sections"), prefixd::modelgen::MetaValue(std::vector<std::int32_t>{16, 24, 24, 0}));
  EXPECT_EQ(hparam("rope.freq_base"), prefixd::modelgen::MetaValue(1000000.0f));
  EXPECT_EQ(hparam("block_count"), prefixd::modelgen::MetaValue(28u));
  EXPECT_EQ(hparam("attention.head_count"), prefixd::modelgen::MetaValue(28u));
  EXPECT_EQ(hparam("attention.head_count_kv"), prefixd::modelgen::MetaValue(4u));
  std::int64_t parameters = 0;
  for (const auto& t : spec.tensors) parameters += t.element_count();
  EXPECT_NEAR(static_cast<double>(parameters), 7.62e9, 0.01e9);  // the text part of Qwen2-VL-7B's 8.3 billion
}

// The real-shape preset is checked on its spec only: writing it takes ~770 MiB of disk.
TEST(ModelgenPresets, Qwen35_0_8bHasTheQwen35_0_8bShapes) {
  const auto spec = prefixd::modelgen::make_spec("qwen35-0.8b");
  EXPECT_EQ(spec.architecture, "qwen35");
  EXPECT_EQ(spec.default_weight_type, "q8_0");
  EXPECT_EQ(spec.vocab.size, 248320u);
  EXPECT_EQ(spec.vocab.n_regular, 248044u);  // <|endoftext|> at 248044, <|im_end|> at 248046
  const auto u32 = [&](const std::string& key) {
    for (const auto& e : spec.hparams) {
      if (e.key == key) return std::get<std::uint32_t>(e.value);
    }
    ADD_FAILURE() << "no " << key;
    return 0u;
  };
  EXPECT_EQ(u32("block_count"), 24u);
  EXPECT_EQ(u32("embedding_length"), 1024u);
  EXPECT_EQ(u32("feed_forward_length"), 3584u);
  EXPECT_EQ(u32("attention.head_count"), 8u);
  EXPECT_EQ(u32("attention.head_count_kv"), 2u);
  EXPECT_EQ(u32("attention.key_length"), 256u);
  EXPECT_EQ(u32("rope.dimension_count"), 64u);
  EXPECT_EQ(u32("full_attention_interval"), 4u);
  EXPECT_EQ(u32("ssm.state_size"), 128u);
  EXPECT_EQ(u32("ssm.group_count"), 16u);
  EXPECT_EQ(u32("ssm.time_step_rank"), 16u);
  EXPECT_EQ(u32("ssm.inner_size"), 2048u);
  const auto shape = [&](const std::string& name) { return spec_shape(spec, name); };
  EXPECT_EQ(shape("token_embd.weight"), (Shape{1024, 248320}));
  EXPECT_EQ(shape("blk.0.attn_qkv.weight"), (Shape{1024, 2 * 2048 + 2048}));
  EXPECT_EQ(shape("blk.0.ssm_out.weight"), (Shape{2048, 1024}));
  EXPECT_EQ(shape("blk.23.attn_q.weight"), (Shape{1024, 2 * 8 * 256}));
  EXPECT_EQ(shape("blk.23.attn_k.weight"), (Shape{1024, 2 * 256}));
  EXPECT_EQ(spec.tensors.size(), 2u + 18 * 14 + 6 * 11);  // tied output head
  std::int64_t parameters = 0;
  for (const auto& t : spec.tensors) {
    parameters += t.element_count();
  }
  EXPECT_EQ(parameters, 752393024);
}

TEST(ModelgenVocabulary, HasChatMlSpecialTokensAndAChatTemplate) {
  const ScratchDir dir;
  const Gguf g(generate(dir, "tiny"));
  EXPECT_EQ(g.str("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.str("tokenizer.ggml.pre"), "qwen2");
  EXPECT_FALSE(g.boolean("tokenizer.ggml.add_bos_token"));

  const auto tokens = g.strings("tokenizer.ggml.tokens");
  const auto types = g.i32s("tokenizer.ggml.token_type");
  ASSERT_EQ(tokens.size(), 4096u);
  ASSERT_EQ(types.size(), tokens.size());
  EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), tokens.size()) << "token texts repeat";
  const auto id_of = [&](const std::string& text) {
    return static_cast<std::size_t>(std::ranges::find(tokens, text) - tokens.begin());
  };
  constexpr std::int32_t kControl = 3;
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    const std::size_t id = id_of(special);
    ASSERT_LT(id, tokens.size()) << special;
    EXPECT_EQ(types[id], kControl) << special;
  }
  EXPECT_EQ(g.u32("tokenizer.ggml.eos_token_id"), id_of("<|im_end|>"));
  EXPECT_LT(id_of("<tool_call>"), tokens.size());

  const std::string tmpl = g.str("tokenizer.chat_template");
  for (const char* part : {"<|im_start|>", "<|im_end|>", "add_generation_prompt", "tools", "tool_calls", "'tool'"}) {
    EXPECT_NE(tmpl.find(part), std::string::npos) << part;
  }
}

TEST(ModelgenVocabulary, MergesMakeMultiCharacterTokensForCommonEnglish) {
  const ScratchDir dir;
  const Gguf g(generate(dir, "tiny"));
  const auto tokens = g.strings("tokenizer.ggml.tokens");
  const auto merges = g.strings("tokenizer.ggml.merges");
  EXPECT_GT(merges.size(), 2000u);
  // Byte-level BPE writes a leading space as "Ġ" (U+0120).
  const std::string space = "\xC4\xA0";
  for (const std::string& word : {std::string("Hello"), space + "world", space + "the", space + "assistant", space + "you"}) {
    EXPECT_NE(std::ranges::find(tokens, word), tokens.end()) << word;
  }
  // The first 256 tokens are the bytes, in GPT-2's printable mapping.
  EXPECT_EQ(tokens[static_cast<unsigned char>('A')], "A");
  EXPECT_EQ(tokens[static_cast<unsigned char>(' ')], "\xC4\xA0");
  EXPECT_EQ(tokens[static_cast<unsigned char>('\n')], "\xC4\x8A");
}

TEST(ModelgenAtomicity, ReplacesAnExistingFileAndLeavesNoTemporaryFile) {
  const ScratchDir dir;
  const fs::path target = dir.file("tiny.gguf");
  std::ofstream(target) << "not a model";
  generate(dir, "tiny");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"tiny.gguf"});
  EXPECT_EQ(read_bytes(target).substr(0, 4), "GGUF");
}

TEST(ModelgenAtomicity, CreatesMissingParentDirectories) {
  const ScratchDir dir;
  generate(dir, "tiny", 42, "", "nested/deeper/tiny.gguf");
  EXPECT_TRUE(fs::is_regular_file(dir.file("nested/deeper/tiny.gguf")));
  EXPECT_FALSE(fs::exists(dir.file("nested/deeper/tiny.gguf.tmp")));
}

TEST(ModelgenAtomicity, FailureLeavesNothingBehind) {
  const ScratchDir dir;
  std::ofstream(dir.file("blocker")) << "a file where a directory should be";
  EXPECT_THROW(generate(dir, "tiny", 42, "", "blocker/tiny.gguf"), std::runtime_error);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"blocker"});
}


// ---- LoRA adapters (--lora-rank) ----------------------------------------------------------------

fs::path generate_lora(const ScratchDir& dir, const std::string& preset, std::uint32_t rank, std::uint64_t seed,
                       const std::string& name, const std::string& weight_type = "") {
  GenerateOptions options;
  options.preset = preset;
  options.out_path = dir.file(name).string();
  options.seed = seed;
  options.weight_type = weight_type;
  options.lora_rank = rank;
  options.quiet = true;
  generate_model(options);
  return options.out_path;
}

// The metadata the Gguf reader has no accessor for: an f32 value, or whether a key is there.
float gguf_f32(const fs::path& path, const std::string& key) {
  const gguf_context_ptr ctx{gguf_init_from_file(path.c_str(), {/*no_alloc=*/true, nullptr})};
  const std::int64_t id = gguf_find_key(ctx.get(), key.c_str());
  if (id < 0 || gguf_get_kv_type(ctx.get(), id) != GGUF_TYPE_FLOAT32) throw std::runtime_error("no f32 " + key);
  return gguf_get_val_f32(ctx.get(), id);
}
bool gguf_has_key(const fs::path& path, const std::string& key) {
  const gguf_context_ptr ctx{gguf_init_from_file(path.c_str(), {/*no_alloc=*/true, nullptr})};
  return gguf_find_key(ctx.get(), key.c_str()) >= 0;
}

const prefixd::modelgen::TensorSpec* find_tensor(const prefixd::modelgen::ModelSpec& spec, const std::string& name) {
  for (const auto& t : spec.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

double stddev_of(const std::vector<float>& values) {
  double sum_sq = 0;
  for (const float v : values) sum_sq += static_cast<double>(v) * v;
  return std::sqrt(sum_sq / static_cast<double>(values.size()));
}

// libllama's llama_adapter_lora_init pairs "<base>.lora_a" with "<base>.lora_b", requires the base
// tensor in the model and checks, in ggml order, lora_a = [n_in, rank] and lora_b = [rank, n_out]
// for a base weight [n_in, n_out]; metadata general.type "adapter", adapter.type "lora",
// adapter.lora.alpha (f32) and the base model's general.architecture.
TEST(ModelgenLora, AdapterSpecPairsEachAttentionProjectionWithLowRankHalvesOfItsShape) {
  using prefixd::modelgen::make_lora_spec;
  const auto base = prefixd::modelgen::make_spec("tiny");
  const auto lora = make_lora_spec(base, {.rank = 8});
  EXPECT_EQ(lora.file_kind, "adapter");
  EXPECT_EQ(lora.architecture, "qwen2");
  EXPECT_EQ(lora.vocab.size, 0u);
  EXPECT_TRUE(lora.hparams.empty());
  ASSERT_EQ(lora.metadata.size(), 2u);
  EXPECT_EQ(lora.metadata[0].key, "adapter.type");
  EXPECT_EQ(std::get<std::string>(lora.metadata[0].value), "lora");
  EXPECT_EQ(lora.metadata[1].key, "adapter.lora.alpha");
  EXPECT_EQ(std::get<float>(lora.metadata[1].value), 8.0f);  // default alpha: the rank (scale 1)

  EXPECT_EQ(lora.tensors.size(), 2u * 2 * 4);  // 2 blocks, q/k/v/output, two halves each
  for (const auto& w : base.tensors) {
    const bool targeted = w.name.starts_with("blk.") &&
                          (w.name.ends_with(".attn_q.weight") || w.name.ends_with(".attn_k.weight") ||
                           w.name.ends_with(".attn_v.weight") || w.name.ends_with(".attn_output.weight"));
    const auto* a = find_tensor(lora, w.name + ".lora_a");
    const auto* b = find_tensor(lora, w.name + ".lora_b");
    ASSERT_EQ(a != nullptr, targeted) << w.name;
    ASSERT_EQ(b != nullptr, targeted) << w.name;
    if (!targeted) continue;
    EXPECT_EQ(a->ne, (Shape{w.ne[0], 8})) << w.name;
    EXPECT_EQ(b->ne, (Shape{8, w.ne[1]})) << w.name;
  }
  EXPECT_EQ(find_tensor(lora, "blk.1.attn_k.weight.lora_a")->ne, (Shape{64, 8}));
  EXPECT_EQ(find_tensor(lora, "blk.1.attn_k.weight.lora_b")->ne, (Shape{8, 32}));  // 2 KV heads of 16
  for (const auto& t : lora.tensors) {
    EXPECT_TRUE(t.name.ends_with(".lora_a") || t.name.ends_with(".lora_b")) << t.name;
    EXPECT_NE(find_tensor(base, t.name.substr(0, t.name.size() - 7)), nullptr) << t.name;
  }
  EXPECT_EQ(std::get<float>(make_lora_spec(base, {.rank = 4, .alpha = 16.0f}).metadata[1].value), 16.0f);
}

TEST(ModelgenLora, TargetsNameWeightsOfEveryBlockThatHasThemAndUnknownOnesThrow) {
  using prefixd::modelgen::make_lora_spec;
  using prefixd::modelgen::make_spec;
  // qwen35-tiny: only block 3 has attention projections (the others are gated delta-net layers).
  const auto hybrid = make_lora_spec(make_spec("qwen35-tiny"), {.rank = 8});
  EXPECT_EQ(hybrid.architecture, "qwen35");
  EXPECT_EQ(hybrid.tensors.size(), 8u);
  EXPECT_EQ(find_tensor(hybrid, "blk.3.attn_q.weight.lora_b")->ne, (Shape{8, 512}));  // queries and gate
  EXPECT_EQ(find_tensor(hybrid, "blk.0.attn_qkv.weight.lora_a"), nullptr);

  const auto gemma = make_lora_spec(make_spec("gemma3-tiny"), {.rank = 4, .targets = {"ffn_down"}});
  EXPECT_EQ(gemma.architecture, "gemma3");
  EXPECT_EQ(gemma.tensors.size(), 2u * 6);
  EXPECT_EQ(find_tensor(gemma, "blk.5.ffn_down.weight.lora_a")->ne, (Shape{256, 4}));
  EXPECT_EQ(find_tensor(gemma, "blk.5.ffn_down.weight.lora_b")->ne, (Shape{4, 128}));

  const auto head = make_lora_spec(make_spec("tiny"), {.rank = 8, .targets = {"ffn_up", "output"}});
  EXPECT_EQ(head.tensors.size(), 2u * 3);
  EXPECT_EQ(find_tensor(head, "output.weight.lora_b")->ne, (Shape{8, 4096}));

  const auto throws_naming = [](const std::string& preset, prefixd::modelgen::LoraOptions options,
                                const std::string& expected) {
    try {
      make_lora_spec(make_spec(preset), options);
      ADD_FAILURE() << preset << ": expected an exception";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  throws_naming("mamba2-tiny", {.rank = 8}, "ssm_in");  // no attention: names the weights it has
  throws_naming("tiny", {.rank = 8, .targets = {"attn_q", "bogus"}}, "bogus");
  throws_naming("tiny", {.rank = 8, .targets = {"token_embd"}}, "token_embd");
  throws_naming("tiny-mmproj", {.rank = 8}, "not a text model");
  throws_naming("tiny", {.rank = 0}, "rank");
  throws_naming("tiny", {.rank = 8, .alpha = -1.0f}, "alpha");
}

TEST(ModelgenLora, AdapterFileCarriesTheAdapterMetadataAndSmallRandomHalves) {
  const ScratchDir dir;
  const fs::path path = generate_lora(dir, "tiny", 8, 42, "tiny-lora.gguf");
  const Gguf g(path);
  EXPECT_EQ(g.str("general.type"), "adapter");
  EXPECT_EQ(g.str("general.architecture"), "qwen2");
  EXPECT_EQ(g.str("adapter.type"), "lora");
  EXPECT_EQ(gguf_f32(path, "adapter.lora.alpha"), 8.0f);
  EXPECT_FALSE(gguf_has_key(path, "tokenizer.ggml.tokens"));
  EXPECT_FALSE(gguf_has_key(path, "qwen2.block_count"));
  EXPECT_EQ(g.tensor_count(), 16);
  EXPECT_EQ(g.shape("blk.0.attn_q.weight.lora_a"), (Shape{64, 8}));
  EXPECT_EQ(g.shape("blk.0.attn_q.weight.lora_b"), (Shape{8, 64}));
  EXPECT_EQ(g.type("blk.0.attn_q.weight.lora_a"), GGML_TYPE_F32);
  EXPECT_EQ(g.type("blk.0.attn_q.weight.lora_b"), GGML_TYPE_F32);
  // A has the base weight's 1/sqrt(fan_in) spread, B 0.5/sqrt(rank): B (A x) is about half of W x.
  EXPECT_NEAR(stddev_of(g.f32_values("blk.1.attn_output.weight.lora_a")), 1.0 / 8, 0.125 * 0.15);
  EXPECT_NEAR(stddev_of(g.f32_values("blk.1.attn_output.weight.lora_b")), 0.5 / std::sqrt(8.0),
              0.5 / std::sqrt(8.0) * 0.15);

  const Gguf half(generate_lora(dir, "gemma3-tiny", 16, 42, "gemma3-lora.gguf", "f16"));
  EXPECT_EQ(half.str("general.architecture"), "gemma3");
  EXPECT_EQ(half.type("blk.0.attn_v.weight.lora_b"), GGML_TYPE_F16);
  EXPECT_THROW(generate_lora(dir, "tiny", 8, 42, "q8.gguf", "q8_0"), std::runtime_error);  // rows of 8
  GenerateOptions no_rank;
  no_rank.out_path = dir.file("no-rank.gguf").string();
  no_rank.lora_targets = {"attn_q"};
  no_rank.quiet = true;
  EXPECT_THROW(generate_model(no_rank), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir.file("q8.gguf")));
  EXPECT_FALSE(fs::exists(dir.file("no-rank.gguf")));
}

TEST(ModelgenLora, SameSeedSameBytesAndLayersKeepTheFirstBlocksHalves) {
  const ScratchDir dir;
  const fs::path a = generate_lora(dir, "tiny", 8, 7, "a.gguf");
  const fs::path b = generate_lora(dir, "tiny", 8, 7, "b.gguf");
  EXPECT_TRUE(read_bytes(a) == read_bytes(b)) << "two runs with seed 7 differ";
  const Gguf first(a);
  const Gguf other(generate_lora(dir, "tiny", 8, 8, "c.gguf"));
  for (const char* name : {"blk.0.attn_q.weight.lora_a", "blk.1.attn_v.weight.lora_b"}) {
    EXPECT_NE(first.raw(name), other.raw(name)) << name;
  }
  // An adapter for a --layers 1 model: block 0's halves only, the same bytes as the full adapter's.
  GenerateOptions cut;
  cut.preset = "tiny";
  cut.out_path = dir.file("cut.gguf").string();
  cut.seed = 7;
  cut.layers = 1;
  cut.lora_rank = 8;
  cut.quiet = true;
  generate_model(cut);
  const Gguf drafter(cut.out_path);
  EXPECT_EQ(drafter.tensor_count(), 8);
  EXPECT_FALSE(drafter.has_tensor("blk.1.attn_q.weight.lora_a"));
  EXPECT_EQ(drafter.raw("blk.0.attn_k.weight.lora_b"), first.raw("blk.0.attn_k.weight.lora_b"));
}

// ---- Embedding and reranking models -------------------------------------------------------------

std::uint32_t spec_u32(const prefixd::modelgen::ModelSpec& spec, const std::string& key) {
  for (const auto& e : spec.hparams) {
    if (e.key == key) return std::get<std::uint32_t>(e.value);
  }
  ADD_FAILURE() << spec.preset << " has no " << key;
  return 0;
}

// tiny-embed: Qwen3-Embedding's layout (Qwen3's blocks, tied head) at tiny's width, with tiny's
// vocabulary and template; qwen3.pooling_type LAST (3) makes libllama return the last token's
// final hidden state. The attention stays causal (no qwen3.attention.causal key).
TEST(ModelgenEmbedding, TinyEmbedIsAQwen3ModelWithLastTokenPooling) {
  const ScratchDir dir;
  const fs::path path = generate(dir, "tiny-embed");
  const Gguf g(path);
  const Gguf tiny(generate(dir, "tiny"));
  EXPECT_EQ(g.str("general.architecture"), "qwen3");
  EXPECT_EQ(g.u32("qwen3.pooling_type"), 3u);
  EXPECT_FALSE(gguf_has_key(path, "qwen3.attention.causal"));
  EXPECT_EQ(g.u32("qwen3.embedding_length"), 64u);
  EXPECT_EQ(g.u32("qwen3.block_count"), 2u);
  EXPECT_EQ(g.u32("qwen3.attention.head_count"), 4u);
  EXPECT_EQ(g.u32("qwen3.attention.head_count_kv"), 2u);
  EXPECT_EQ(g.u32("qwen3.attention.key_length"), 16u);
  EXPECT_EQ(g.tensor_count(), 2 + 2 * 11);  // tied head, no classifier
  EXPECT_FALSE(g.has_tensor("output.weight"));
  EXPECT_FALSE(g.has_tensor("cls.output.weight"));
  EXPECT_EQ(g.shape("blk.1.attn_q_norm.weight"), (Shape{16}));
  EXPECT_EQ(g.shape("blk.1.attn_k.weight"), (Shape{64, 32}));
  EXPECT_FALSE(g.has_tensor("blk.1.attn_q.bias"));
  EXPECT_EQ(g.raw("token_embd.weight"), tiny.raw("token_embd.weight"));  // seeded by name
  EXPECT_EQ(g.strings("tokenizer.ggml.tokens"), tiny.strings("tokenizer.ggml.tokens"));
  EXPECT_EQ(g.strings("tokenizer.ggml.merges"), tiny.strings("tokenizer.ggml.merges"));
  EXPECT_EQ(g.str("tokenizer.chat_template"), tiny.str("tokenizer.chat_template"));
}

// Qwen3-Embedding-0.6B, checked on the spec (the file is about 608 MiB).
TEST(ModelgenEmbedding, Qwen3Embed0_6bHasQwen3Embedding06bShapes) {
  const auto spec = prefixd::modelgen::make_spec("qwen3-embed-0.6b");
  EXPECT_EQ(spec.architecture, "qwen3");
  EXPECT_EQ(spec.default_weight_type, "q8_0");
  EXPECT_EQ(spec.vocab.size, 151936u);
  EXPECT_EQ(spec.vocab.n_regular, 151643u);
  EXPECT_EQ(spec_u32(spec, "embedding_length"), 1024u);
  EXPECT_EQ(spec_u32(spec, "block_count"), 28u);
  EXPECT_EQ(spec_u32(spec, "feed_forward_length"), 3072u);
  EXPECT_EQ(spec_u32(spec, "attention.head_count"), 16u);
  EXPECT_EQ(spec_u32(spec, "attention.head_count_kv"), 8u);
  EXPECT_EQ(spec_u32(spec, "attention.key_length"), 128u);
  EXPECT_EQ(spec_u32(spec, "attention.value_length"), 128u);
  EXPECT_EQ(spec_u32(spec, "context_length"), 32768u);
  EXPECT_EQ(spec_u32(spec, "pooling_type"), 3u);
  const auto shape = [&](const std::string& name) { return spec_shape(spec, name); };
  EXPECT_EQ(shape("token_embd.weight"), (Shape{1024, 151936}));
  EXPECT_EQ(shape("blk.27.attn_q.weight"), (Shape{1024, 16 * 128}));
  EXPECT_EQ(shape("blk.27.attn_k.weight"), (Shape{1024, 8 * 128}));
  EXPECT_EQ(shape("blk.27.attn_output.weight"), (Shape{16 * 128, 1024}));
  EXPECT_EQ(shape("blk.27.attn_k_norm.weight"), (Shape{128}));
  EXPECT_EQ(shape("blk.27.ffn_down.weight"), (Shape{3072, 1024}));
  EXPECT_EQ(spec.tensors.size(), 2u + 28 * 11);
  std::int64_t parameters = 0;
  for (const auto& t : spec.tensors) parameters += t.element_count();
  EXPECT_EQ(parameters, 596049920);  // 1024 × 151936 embeddings, 28 blocks of 15.7 M, the output norm
}

// tiny-qwen3-reranker, as llama.cpp's converter writes Qwen3-Reranker: RANK pooling, two output
// labels, and cls.output.weight made of the (tied) head's rows for the two answers, "yes" first;
// the rerank prompt is a named template with placeholders, listed in tokenizer.chat_templates.
TEST(ModelgenEmbedding, TinyQwen3RerankerClassifiesWithTheHeadRowsOfItsAnswers) {
  const ScratchDir dir;
  const fs::path path = generate(dir, "tiny-qwen3-reranker");
  const Gguf g(path);
  const Gguf embed(generate(dir, "tiny-embed"));
  EXPECT_EQ(g.str("general.architecture"), "qwen3");
  EXPECT_EQ(g.u32("qwen3.pooling_type"), 4u);
  EXPECT_EQ(g.strings("qwen3.classifier.output_labels"), (std::vector<std::string>{"yes", "no"}));
  EXPECT_EQ(g.tensor_count(), embed.tensor_count() + 1);
  EXPECT_EQ(g.raw("blk.1.ffn_up.weight"), embed.raw("blk.1.ffn_up.weight"));
  ASSERT_EQ(g.shape("cls.output.weight"), (Shape{64, 2}));
  // tiny's merges make no "yes" or "no" token: the answers start with the byte tokens "y" and "n".
  const auto tokens = g.strings("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.at('y'), "y");
  ASSERT_EQ(tokens.at('n'), "n");
  const auto head = g.f32_values("token_embd.weight");
  const auto cls = g.f32_values("cls.output.weight");
  const auto row = [](const std::vector<float>& values, std::size_t r) {
    return std::vector<float>(values.begin() + static_cast<std::ptrdiff_t>(r * 64),
                              values.begin() + static_cast<std::ptrdiff_t>((r + 1) * 64));
  };
  EXPECT_EQ(row(cls, 0), row(head, 'y'));
  EXPECT_EQ(row(cls, 1), row(head, 'n'));

  const std::string rerank = g.str("tokenizer.chat_template.rerank");
  for (const char* part : {"{query}", "{document}", "<|im_start|>user\n"}) {
    EXPECT_NE(rerank.find(part), std::string::npos) << part;
  }
  EXPECT_TRUE(rerank.ends_with("<|im_start|>assistant\n"));
  EXPECT_EQ(rerank.find("{%"), std::string::npos) << "llama-server substitutes, it does not render Jinja";
  EXPECT_EQ(g.strings("tokenizer.chat_templates"), std::vector<std::string>{"rerank"});
  EXPECT_EQ(g.str("tokenizer.chat_template"), embed.str("tokenizer.chat_template"));

  // The rows are copied before quantization: in q8_0 they are the head's rows byte for byte.
  const Gguf q8(generate(dir, "tiny-qwen3-reranker", 42, "q8_0", "q8.gguf"));
  ASSERT_EQ(q8.type("cls.output.weight"), GGML_TYPE_Q8_0);
  const std::size_t row_bytes = ggml_row_size(GGML_TYPE_Q8_0, 64);
  const std::string q8_head = q8.raw("token_embd.weight");
  EXPECT_EQ(q8.raw("cls.output.weight"),
            q8_head.substr('y' * row_bytes, row_bytes) + q8_head.substr('n' * row_bytes, row_bytes));

  // The labels describe the whole model: --layers keeps them.
  GenerateOptions cut;
  cut.preset = "tiny-qwen3-reranker";
  cut.out_path = dir.file("cut.gguf").string();
  cut.layers = 1;
  cut.quiet = true;
  generate_model(cut);
  const Gguf first(cut.out_path);
  EXPECT_EQ(first.u32("qwen3.block_count"), 1u);
  EXPECT_EQ(first.strings("qwen3.classifier.output_labels"), (std::vector<std::string>{"yes", "no"}));
  EXPECT_EQ(first.raw("cls.output.weight"), g.raw("cls.output.weight"));
}

// tiny-bert: the tensors llama.cpp's bert loader requires (token, segment and position embeddings,
// an embedding LayerNorm, Q/K/V/output with biases, two post-norms, a biased up/down FFN per block)
// and no head; non-causal attention, mean pooling, LayerNorm epsilon 1e-12, 512 positions.
TEST(ModelgenEmbedding, TinyBertHasTheTensorsOfLlamaCppsBertGraph) {
  const ScratchDir dir;
  const fs::path path = generate(dir, "tiny-bert");
  const Gguf g(path);
  EXPECT_EQ(g.str("general.architecture"), "bert");
  EXPECT_FALSE(g.boolean("bert.attention.causal"));
  EXPECT_EQ(g.u32("bert.pooling_type"), 1u);
  EXPECT_EQ(g.f32("bert.attention.layer_norm_epsilon"), 1e-12f);
  EXPECT_EQ(g.u32("bert.context_length"), 512u);
  EXPECT_EQ(g.u32("bert.embedding_length"), 64u);
  EXPECT_EQ(g.u32("bert.feed_forward_length"), 256u);
  EXPECT_EQ(g.u32("bert.block_count"), 2u);
  EXPECT_EQ(g.u32("bert.attention.head_count"), 4u);
  EXPECT_FALSE(gguf_has_key(path, "bert.attention.head_count_kv"));
  EXPECT_EQ(g.tensor_count(), 5 + 2 * 16);
  EXPECT_EQ(g.shape("token_embd.weight"), (Shape{64, 4096}));
  EXPECT_EQ(g.shape("token_types.weight"), (Shape{64, 2}));
  EXPECT_EQ(g.u32("tokenizer.ggml.token_type_count"), 2u);
  EXPECT_EQ(g.shape("position_embd.weight"), (Shape{64, 512}));
  EXPECT_EQ(g.shape("token_embd_norm.bias"), (Shape{64}));
  for (const char* proj : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
    EXPECT_EQ(g.shape(std::format("blk.1.{}.weight", proj)), (Shape{64, 64})) << proj;
    EXPECT_EQ(g.shape(std::format("blk.1.{}.bias", proj)), (Shape{64})) << proj;
  }
  EXPECT_EQ(g.shape("blk.1.ffn_up.weight"), (Shape{64, 256}));
  EXPECT_EQ(g.shape("blk.1.ffn_up.bias"), (Shape{256}));
  EXPECT_EQ(g.shape("blk.1.ffn_down.weight"), (Shape{256, 64}));
  EXPECT_EQ(g.shape("blk.1.ffn_down.bias"), (Shape{64}));
  for (const char* norm : {"blk.1.attn_output_norm", "blk.1.layer_output_norm", "token_embd_norm"}) {
    for (const float v : g.f32_values(std::string(norm) + ".weight")) ASSERT_EQ(v, 1.0f) << norm;
    for (const float v : g.f32_values(std::string(norm) + ".bias")) ASSERT_EQ(v, 0.0f) << norm;
  }
  for (const char* absent : {"output.weight", "output_norm.weight", "cls.weight", "cls.output.weight"}) {
    EXPECT_FALSE(g.has_tensor(absent)) << absent;
  }
  // llama.cpp keeps the position and segment tables in f32; the linear weights take the type.
  const Gguf q8(generate(dir, "tiny-bert", 42, "q8_0", "q8.gguf"));
  EXPECT_EQ(q8.type("position_embd.weight"), GGML_TYPE_F32);
  EXPECT_EQ(q8.type("token_types.weight"), GGML_TYPE_F32);
  EXPECT_EQ(q8.type("blk.0.attn_q.weight"), GGML_TYPE_Q8_0);
  EXPECT_EQ(q8.type("blk.0.attn_q.bias"), GGML_TYPE_F32);
}

// tiny-bert-reranker: tiny-bert's encoder with RoBERTa's classification head, which llama.cpp's
// RANK pooling applies to the [CLS] state: cls (n_embd to n_embd, tanh) then cls.output (to one
// score). One score, so no output labels.
TEST(ModelgenEmbedding, TinyBertRerankerAddsTheClassificationHead) {
  const ScratchDir dir;
  const fs::path path = generate(dir, "tiny-bert-reranker");
  const Gguf g(path);
  const Gguf encoder(generate(dir, "tiny-bert"));
  EXPECT_EQ(g.u32("bert.pooling_type"), 4u);
  EXPECT_FALSE(g.boolean("bert.attention.causal"));
  EXPECT_FALSE(gguf_has_key(path, "bert.classifier.output_labels"));
  EXPECT_EQ(g.tensor_count(), encoder.tensor_count() + 4);
  EXPECT_EQ(g.shape("cls.weight"), (Shape{64, 64}));
  EXPECT_EQ(g.shape("cls.bias"), (Shape{64}));
  EXPECT_EQ(spec_shape(prefixd::modelgen::make_spec("tiny-bert-reranker"), "cls.output.weight"), (Shape{64, 1}));
  EXPECT_EQ(g.shape("cls.output.weight"), (Shape{64}));  // ggml_n_dims leaves out the trailing 1
  EXPECT_EQ(g.shape("cls.output.bias"), (Shape{1}));
  EXPECT_EQ(g.raw("blk.0.attn_q.weight"), encoder.raw("blk.0.attn_q.weight"));
  EXPECT_EQ(g.strings("tokenizer.ggml.tokens"), encoder.strings("tokenizer.ggml.tokens"));
}

// The WordPiece vocabulary as convert_hf_to_gguf.py writes BERT's: tokenizer model "bert", the
// bracketed specials as control tokens with their ids under the tokenizer keys, [CLS] and [SEP]
// as BOS and EOS added around every input, one [SEP] between a pair's texts, an uncased (lowercase)
// vocabulary; word-start pieces behind U+2581 and continuation pieces bare (no "##"); no merges
// and no chat template.
TEST(ModelgenVocabulary, WordPieceIsStoredAsLlamaCppsConverterStoresBert) {
  const ScratchDir dir;
  const fs::path path = generate(dir, "tiny-bert");
  const Gguf g(path);
  EXPECT_EQ(g.str("tokenizer.ggml.model"), "bert");
  EXPECT_EQ(g.str("tokenizer.ggml.pre"), "default");
  EXPECT_FALSE(gguf_has_key(path, "tokenizer.ggml.merges"));
  EXPECT_FALSE(gguf_has_key(path, "tokenizer.chat_template"));
  const auto tokens = g.strings("tokenizer.ggml.tokens");
  const auto types = g.i32s("tokenizer.ggml.token_type");
  ASSERT_EQ(tokens.size(), 4096u);
  ASSERT_EQ(types.size(), tokens.size());
  EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), tokens.size()) << "token texts repeat";
  constexpr std::int32_t kNormal = 1, kControl = 3;
  const std::vector<std::string> specials = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (std::size_t id = 0; id < specials.size(); ++id) {
    EXPECT_EQ(tokens[id], specials[id]);
    EXPECT_EQ(types[id], kControl) << specials[id];
  }
  EXPECT_EQ(g.u32("tokenizer.ggml.padding_token_id"), 0u);
  EXPECT_EQ(g.u32("tokenizer.ggml.unknown_token_id"), 1u);
  EXPECT_EQ(g.u32("tokenizer.ggml.cls_token_id"), 2u);
  EXPECT_EQ(g.u32("tokenizer.ggml.bos_token_id"), 2u);
  EXPECT_EQ(g.u32("tokenizer.ggml.seperator_token_id"), 3u);  // sic: llama.cpp's key
  EXPECT_EQ(g.u32("tokenizer.ggml.eos_token_id"), 3u);
  EXPECT_EQ(g.u32("tokenizer.ggml.mask_token_id"), 4u);
  EXPECT_TRUE(g.boolean("tokenizer.ggml.add_bos_token"));
  EXPECT_TRUE(g.boolean("tokenizer.ggml.add_eos_token"));
  EXPECT_FALSE(g.boolean("tokenizer.ggml.add_sep_token"));
  EXPECT_TRUE(g.boolean("tokenizer.ggml.normalizer.lowercase"));

  const std::string word_start = "\xE2\x96\x81";
  const std::set<std::string> vocab(tokens.begin(), tokens.end());
  for (char c = 'a'; c <= 'z'; ++c) {
    EXPECT_TRUE(vocab.contains(word_start + c)) << c;
    EXPECT_TRUE(vocab.contains(std::string(1, c))) << c;
  }
  for (const std::string& piece : {word_start + "the", word_start + "assistant", word_start + ",", word_start + "7",
                                   std::string("ing")}) {
    EXPECT_TRUE(vocab.contains(piece)) << piece;
  }
  for (std::size_t id = specials.size(); id < tokens.size(); ++id) {
    const std::string& t = tokens[id];
    if (t.starts_with("[unused")) {
      EXPECT_EQ(types[id], kControl) << t;
      continue;
    }
    EXPECT_EQ(types[id], kNormal) << t;
    EXPECT_FALSE(t.starts_with("##")) << t;
    EXPECT_TRUE(std::ranges::none_of(t, [](char c) { return c >= 'A' && c <= 'Z'; })) << t;
  }
}

// The pieces, tokenized the way llama.cpp's WPM tokenizer does (lowercase, split at whitespace
// and punctuation, then greedy longest match from the start of "▁" + word, a word with no match
// becoming [UNK]): English text the corpus never saw comes out as pieces, several characters each
// on average, and never [UNK].
TEST(ModelgenVocabulary, WordPieceTokenizesOrdinaryEnglishIntoPiecesNotUnknown) {
  const ScratchDir dir;
  const auto tokens = Gguf(generate(dir, "tiny-bert")).strings("tokenizer.ggml.tokens");
  const std::set<std::string> vocab(tokens.begin(), tokens.end());
  const auto tokenize = [&](const std::string& text) {
    std::vector<std::string> pieces;
    for (const std::string& word : prefixd::modelgen::bert_words(text)) {
      const std::string w = "\xE2\x96\x81" + word;
      std::vector<std::string> out;
      for (std::size_t i = 0; i < w.size();) {
        std::size_t j = w.size();
        while (j > i && !vocab.contains(w.substr(i, j - i))) --j;
        if (j == i) {
          out = {"[UNK]"};
          break;
        }
        out.push_back(w.substr(i, j - i));
        i = j;
      }
      pieces.insert(pieces.end(), out.begin(), out.end());
    }
    return pieces;
  };
  const std::string text =
      "Yesterday the quick brown fox jumped over three lazy dogs! Rivers carry water from distant mountains to "
      "the ocean, and engineers measure how quickly it flows in 2031.";
  const auto pieces = tokenize(text);
  EXPECT_EQ(std::ranges::count(pieces, "[UNK]"), 0);
  EXPECT_LT(pieces.size(), text.size() / 3) << "mostly single letters";
  const std::string word_start = "\xE2\x96\x81";
  EXPECT_EQ(tokenize("Hello, world"),
            (std::vector<std::string>{word_start + "hello", word_start + ",", word_start + "world"}));
  EXPECT_EQ(prefixd::modelgen::bert_words("Don't STOP-now"),
            (std::vector<std::string>{"don", "'", "t", "stop", "-", "now"}));
}

}  // namespace
