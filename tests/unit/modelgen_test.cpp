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
      {"tiny-qwen2vl-mmproj", "clip"}, {"tiny128-qwen2vl-mmproj", "clip"}, {"qwen2vl-7b-mmproj", "clip"},
      {"tiny-qwen25vl-mmproj", "clip"}, {"qwen25vl-7b-mmproj", "clip"},
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

// The shape a spec gives one of its tensors (a failure and no shape when it has none).
Shape spec_shape(const prefixd::modelgen::ModelSpec& spec, const std::string& name) {
  for (const auto& t : spec.tensors) {
    if (t.name == name) return t.ne;
  }
  ADD_FAILURE() << "no " << name;
  return {};
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

}  // namespace
