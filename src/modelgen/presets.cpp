// Presets: architecture hyper-parameters and tensor layouts, written the way llama.cpp's loader
// expects them (tensor names and ggml shapes follow llama.cpp's converter output for each
// architecture; ne[0] is the input dimension of a linear weight).
#include <cmath>
#include <format>
#include <stdexcept>
#include <string_view>

#include "modelgen/modelgen.h"
#include "modelgen/spec.h"
#include "modelgen/vocab.h"

namespace prefixd::modelgen {

std::int64_t TensorSpec::element_count() const {
  std::int64_t n = 1;
  for (const auto d : ne) {
    n *= d;
  }
  return n;
}

namespace {

// Linear weight of a layer mapping `in` features to `out`. Drawn with variance 1/in so every
// projection roughly preserves the scale of its (normalized) input: activations stay O(1)
// through any depth instead of vanishing (which would make logits ignore the context) or
// blowing up (which would overflow f16).
TensorSpec linear(std::string name, std::int64_t in, std::int64_t out) {
  return {std::move(name), {in, out}, Normal{1.0f / std::sqrt(static_cast<float>(in))}, StorageClass::matrix};
}

// RMS-norm gain. llama.cpp's converters store Gemma/Qwen3.5 "1 + w" gains already folded, so a
// freshly initialised norm is all ones for every architecture here.
TensorSpec norm(std::string name, std::int64_t n) { return {std::move(name), {n}, Constant{1.0f}, StorageClass::f32}; }

TensorSpec bias(std::string name, std::int64_t n) { return {std::move(name), {n}, Normal{0.02f}, StorageClass::f32}; }

std::string blk(int layer, std::string_view what) { return std::format("blk.{}.{}", layer, what); }

// The embedding table doubles as the output projection when `tied`; its rows are drawn with the
// same 1/n_embd variance as any linear weight, so logits come out with unit-ish spread.
void add_embeddings(ModelSpec& spec, std::int64_t n_embd, bool tied) {
  const std::int64_t n_vocab = spec.vocab.size;
  spec.tensors.push_back(linear("token_embd.weight", n_embd, n_vocab));
  spec.tensors.push_back(norm("output_norm.weight", n_embd));
  if (!tied) {
    spec.tensors.push_back(linear("output.weight", n_embd, n_vocab));
  }
}

// Hyper-parameters every architecture here shares.
void add_common_hparams(ModelSpec& spec, std::uint32_t n_ctx, std::uint32_t n_embd, std::uint32_t n_layer,
                        float rms_eps) {
  spec.hparams.push_back({"context_length", n_ctx});
  spec.hparams.push_back({"embedding_length", n_embd});
  spec.hparams.push_back({"block_count", n_layer});
  spec.hparams.push_back({"attention.layer_norm_rms_epsilon", rms_eps});
}

// ---- qwen2: dense attention with q/k/v biases, SwiGLU FFN -------------------------------------

struct Qwen2Shape {
  std::uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
  float rope_base, rms_eps;
  bool tied;
};

void build_qwen2(ModelSpec& spec, const Qwen2Shape& s) {
  spec.architecture = "qwen2";
  add_common_hparams(spec, s.n_ctx, s.n_embd, s.n_layer, s.rms_eps);
  spec.hparams.push_back({"feed_forward_length", s.n_ff});
  spec.hparams.push_back({"attention.head_count", s.n_head});
  spec.hparams.push_back({"attention.head_count_kv", s.n_head_kv});
  spec.hparams.push_back({"rope.freq_base", s.rope_base});

  const std::int64_t head_dim = s.n_embd / s.n_head;
  const std::int64_t kv_dim = head_dim * s.n_head_kv;
  add_embeddings(spec, s.n_embd, s.tied);
  for (int il = 0; il < static_cast<int>(s.n_layer); ++il) {
    spec.tensors.push_back(norm(blk(il, "attn_norm.weight"), s.n_embd));
    spec.tensors.push_back(linear(blk(il, "attn_q.weight"), s.n_embd, s.n_embd));
    spec.tensors.push_back(bias(blk(il, "attn_q.bias"), s.n_embd));
    spec.tensors.push_back(linear(blk(il, "attn_k.weight"), s.n_embd, kv_dim));
    spec.tensors.push_back(bias(blk(il, "attn_k.bias"), kv_dim));
    spec.tensors.push_back(linear(blk(il, "attn_v.weight"), s.n_embd, kv_dim));
    spec.tensors.push_back(bias(blk(il, "attn_v.bias"), kv_dim));
    spec.tensors.push_back(linear(blk(il, "attn_output.weight"), s.n_embd, s.n_embd));
    spec.tensors.push_back(norm(blk(il, "ffn_norm.weight"), s.n_embd));
    spec.tensors.push_back(linear(blk(il, "ffn_gate.weight"), s.n_embd, s.n_ff));
    spec.tensors.push_back(linear(blk(il, "ffn_up.weight"), s.n_embd, s.n_ff));
    spec.tensors.push_back(linear(blk(il, "ffn_down.weight"), s.n_ff, s.n_embd));
  }
}

ModelSpec tiny() {
  ModelSpec spec{.preset = "tiny", .display_name = "prefixd tiny (random)", .default_weight_type = "f32",
                 .vocab = {.size = 4096, .n_regular = 4000}};
  // Separate output head (unlike qwen2-0.5b) so both the tied and the untied path get exercised.
  build_qwen2(spec, {.n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .n_ff = 128, .n_ctx = 4096,
                     .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = false});
  return spec;
}

ModelSpec qwen2_0_5b() {
  // Qwen2.5-0.5B: 151643 regular tokens, 22 specials and padding up to the embedding size.
  ModelSpec spec{.preset = "qwen2-0.5b", .display_name = "prefixd qwen2-0.5b (random)",
                 .default_weight_type = "q8_0", .vocab = {.size = 151936, .n_regular = 151643}};
  build_qwen2(spec, {.n_embd = 896, .n_layer = 24, .n_head = 14, .n_head_kv = 2, .n_ff = 4864, .n_ctx = 32768,
                     .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true});
  return spec;
}

ModelSpec qwen2_7b() {
  // Qwen2.5-7B: a model the size users serve on one GPU (about 8 GB at q8_0), for GPU benchmarks;
  // its own output head, 152064 rows with the padding.
  ModelSpec spec{.preset = "qwen2-7b", .display_name = "prefixd qwen2-7b (random)", .default_weight_type = "q8_0",
                 .vocab = {.size = 152064, .n_regular = 151643}};
  build_qwen2(spec, {.n_embd = 3584, .n_layer = 28, .n_head = 28, .n_head_kv = 4, .n_ff = 18944, .n_ctx = 32768,
                     .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = false});
  return spec;
}

// ---- qwen2vl: Qwen2-VL's text model, qwen2's layout with multi-section RoPE (M-RoPE) -----------

// The tensors are qwen2's; rope.dimension_sections splits each head's rotary frequency pairs
// among the temporal, height and width parts of a position (the fourth section is unused, 0),
// and its presence is what makes llama.cpp rotate with M-RoPE. A text token has the same value in
// every part, so text alone is rotated exactly as plain RoPE; the image tokens libmtmd inserts
// get (t, y, x) positions, and a whole image advances the text position by the larger side of its
// token grid rather than by its token count.
void build_qwen2vl(ModelSpec& spec, const Qwen2Shape& s, std::vector<std::int32_t> sections) {
  build_qwen2(spec, s);
  spec.architecture = "qwen2vl";
  spec.hparams.push_back({"rope.dimension_sections", std::move(sections)});
}

// `tiny` as a Qwen2-VL text model: the same shapes, vocabulary and chat template, so the same
// prompts tokenize the same. Heads of 16 rotate 8 frequency pairs, split like Qwen2-VL's
// [16, 24, 24] of 64 pairs.
ModelSpec tiny_qwen2vl() {
  ModelSpec spec{.preset = "tiny-qwen2vl", .display_name = "prefixd tiny-qwen2vl (random)",
                 .default_weight_type = "f32", .vocab = {.size = 4096, .n_regular = 4000}};
  build_qwen2vl(spec, {.n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .n_ff = 128, .n_ctx = 4096,
                       .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = false},
                {2, 3, 3, 0});
  return spec;
}

// Qwen2-VL-7B-Instruct's text model (config.json: hidden 3584, 28 layers, 28 query / 4 KV heads
// of 128, intermediate 18944, rope_theta 1e6, rms_norm_eps 1e-6, mrope_section [16, 24, 24],
// max_position_embeddings 32768, untied head, vocabulary padded to 152064): qwen2-7b's shapes.
ModelSpec qwen2vl_7b() {
  ModelSpec spec{.preset = "qwen2vl-7b", .display_name = "prefixd qwen2vl-7b (random)",
                 .default_weight_type = "q8_0", .vocab = {.size = 152064, .n_regular = 151643}};
  build_qwen2vl(spec, {.n_embd = 3584, .n_layer = 28, .n_head = 28, .n_head_kv = 4, .n_ff = 18944, .n_ctx = 32768,
                       .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = false},
                {16, 24, 24, 0});
  return spec;
}

// Qwen3's blocks: no Q/K/V biases, an RMS norm on each query and key head before the rotation,
// SwiGLU FFN. The Qwen3-VL text models and the Qwen3 embedding and reranking models share them.
void add_qwen3_blocks(ModelSpec& spec, std::int64_t n_embd, std::uint32_t n_layer, std::int64_t n_head,
                      std::int64_t n_head_kv, std::int64_t head_dim, std::int64_t n_ff) {
  const std::int64_t q_dim = head_dim * n_head, kv_dim = head_dim * n_head_kv;
  for (int il = 0; il < static_cast<int>(n_layer); ++il) {
    spec.tensors.push_back(norm(blk(il, "attn_norm.weight"), n_embd));
    spec.tensors.push_back(linear(blk(il, "attn_q.weight"), n_embd, q_dim));
    spec.tensors.push_back(linear(blk(il, "attn_k.weight"), n_embd, kv_dim));
    spec.tensors.push_back(linear(blk(il, "attn_v.weight"), n_embd, kv_dim));
    spec.tensors.push_back(norm(blk(il, "attn_q_norm.weight"), head_dim));
    spec.tensors.push_back(norm(blk(il, "attn_k_norm.weight"), head_dim));
    spec.tensors.push_back(linear(blk(il, "attn_output.weight"), q_dim, n_embd));
    spec.tensors.push_back(norm(blk(il, "ffn_norm.weight"), n_embd));
    spec.tensors.push_back(linear(blk(il, "ffn_gate.weight"), n_embd, n_ff));
    spec.tensors.push_back(linear(blk(il, "ffn_up.weight"), n_embd, n_ff));
    spec.tensors.push_back(linear(blk(il, "ffn_down.weight"), n_ff, n_embd));
  }
}

// ---- qwen3vl: Qwen3-VL's text model, Qwen3's layout with interleaved M-RoPE and deepstack ----

struct Qwen3VlShape {
  std::uint32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
  float rope_base, rms_eps;
  bool tied;
  // Interleaved M-RoPE sections over a head's head_dim / 2 frequency pairs: temporal, height,
  // width, and a fourth (0), as below.
  std::vector<std::int32_t> sections;
  // Vision features added to the residual stream after each of the first n_deepstack blocks.
  std::uint32_t n_deepstack;
};

// A Qwen3 block stack's feed-forward width, heads (query and K/V, each head_dim wide) and RoPE base.
void add_attention_hparams(ModelSpec& spec, std::uint32_t n_ff, std::uint32_t n_head, std::uint32_t n_head_kv,
                           std::uint32_t head_dim, float rope_base) {
  spec.hparams.push_back({"feed_forward_length", n_ff});
  spec.hparams.push_back({"attention.head_count", n_head});
  spec.hparams.push_back({"attention.head_count_kv", n_head_kv});
  spec.hparams.push_back({"attention.key_length", head_dim});
  spec.hparams.push_back({"attention.value_length", head_dim});
  spec.hparams.push_back({"rope.freq_base", rope_base});
}

// Qwen3's blocks, rotated the Qwen3-VL way: llama.cpp rotates a qwen3vl model with interleaved
// M-RoPE (IMROPE): instead of one contiguous run of frequency pairs per part, pair i belongs to
// part i mod 3 (temporal, height, width) while i < 3 × sections[i mod 3], and to the fourth
// component past that. Text tokens carry the same value in every part, which makes the rotation
// plain RoPE for them.
//
// Deepstack: the projector of a model with n deepstack layers emits, per image token, the main
// embedding followed by n more of the same width (the mergers of n inner vision blocks); the
// model's input width (llama_model_n_embd_inp) is then n_embd × (1 + n), block i < n adds slice
// i + 1 of that row to its output, and a text token's row carries zeros there. libmtmd refuses a
// projector whose output width is not that input width, so a text preset's n_deepstack must
// equal the number of deepstack mergers its projector has.
void build_qwen3vl(ModelSpec& spec, const Qwen3VlShape& s) {
  spec.architecture = "qwen3vl";
  add_common_hparams(spec, s.n_ctx, s.n_embd, s.n_layer, s.rms_eps);
  add_attention_hparams(spec, s.n_ff, s.n_head, s.n_head_kv, s.head_dim, s.rope_base);
  spec.hparams.push_back({"rope.dimension_sections", s.sections});
  spec.hparams.push_back({"n_deepstack_layers", s.n_deepstack});

  add_embeddings(spec, s.n_embd, s.tied);
  add_qwen3_blocks(spec, s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.head_dim, s.n_ff);
}

// `tiny` as a Qwen3-VL text model: tiny's width, depth, heads, vocabulary and chat template (so
// the same prompts tokenize the same) in Qwen3's layout, with its own output head like tiny. It
// pairs with tiny-qwen3vl-mmproj, which has no deepstack mergers: no deepstack layers here, so
// the input width stays 64. Heads of 16 rotate 8 frequency pairs, split about as Qwen3-VL splits
// its 64 ([24, 20, 20]): 3 temporal, 3 height, 2 width, which the interleave lays out as
// t h w t h w t h.
ModelSpec tiny_qwen3vl() {
  ModelSpec spec{.preset = "tiny-qwen3vl", .display_name = "prefixd tiny-qwen3vl (random)",
                 .default_weight_type = "f32", .vocab = {.size = 4096, .n_regular = 4000}};
  build_qwen3vl(spec, {.n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_ff = 128,
                       .n_ctx = 4096, .rope_base = 5000000.0f, .rms_eps = 1e-6f, .tied = false,
                       .sections = {3, 3, 2, 0}, .n_deepstack = 0});
  return spec;
}

// Qwen3-VL-2B-Instruct's text model (config.json "text_config": hidden 2048, 28 layers, 16 query
// / 8 KV heads of head_dim 128, intermediate 6144, rope_theta 5e6, rms_norm_eps 1e-6,
// mrope_section [24, 20, 20] interleaved, max_position_embeddings 262144, tied embeddings, vocab
// 151936 with <|endoftext|> at 151643) and its vision config's three deepstack_visual_indexes:
// an input width of 4 × 2048, which qwen3vl-2b-mmproj's three deepstack mergers fill.
ModelSpec qwen3vl_2b() {
  ModelSpec spec{.preset = "qwen3vl-2b", .display_name = "prefixd qwen3vl-2b (random)",
                 .default_weight_type = "q8_0", .vocab = {.size = 151936, .n_regular = 151643}};
  build_qwen3vl(spec, {.n_embd = 2048, .n_layer = 28, .n_head = 16, .n_head_kv = 8, .head_dim = 128, .n_ff = 6144,
                       .n_ctx = 262144, .rope_base = 5000000.0f, .rms_eps = 1e-6f, .tied = true,
                       .sections = {24, 20, 20, 0}, .n_deepstack = 3});
  return spec;
}

// ---- qwen3: Qwen3's decoder blocks as embedding and reranking models --------------------------

struct Qwen3Shape {
  std::uint32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
  float rope_base, rms_eps;
};

// Qwen3's blocks with plain RoPE and a tied head, as Qwen3-Embedding-0.6B and Qwen3-Reranker-0.6B
// have them. The attention stays causal: what makes a qwen3 file an embedding or a reranking
// model is only its qwen3.pooling_type (and a reranker's classifier), which the caller adds.
void build_qwen3(ModelSpec& spec, const Qwen3Shape& s) {
  spec.architecture = "qwen3";
  add_common_hparams(spec, s.n_ctx, s.n_embd, s.n_layer, s.rms_eps);
  add_attention_hparams(spec, s.n_ff, s.n_head, s.n_head_kv, s.head_dim, s.rope_base);
  add_embeddings(spec, s.n_embd, /*tied=*/true);
  add_qwen3_blocks(spec, s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.head_dim, s.n_ff);
}

// llama_pooling_type values, as GGUF's <arch>.pooling_type stores them.
constexpr std::uint32_t kPoolingMean = 1;  // the mean of the sequence's final hidden states
constexpr std::uint32_t kPoolingLast = 3;  // the last token's final hidden state
constexpr std::uint32_t kPoolingRank = 4;  // a classifier on one token's state: a relevance score

// tiny's width, depth, heads, FFN and context in Qwen3's blocks (Qwen3's RoPE base and epsilon).
const Qwen3Shape kTinyQwen3 = {.n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
                               .n_ff = 128, .n_ctx = 4096, .rope_base = 1000000.0f, .rms_eps = 1e-6f};

// A Qwen3-Embedding-style model with tiny's vocabulary and template: an embedding is the final
// (output-normed) hidden state of the last token, which under causal attention is the only one
// that has seen the whole input. llama-server L2-normalizes it.
ModelSpec tiny_embed() {
  ModelSpec spec{.preset = "tiny-embed", .display_name = "prefixd tiny-embed (random)",
                 .default_weight_type = "f32", .vocab = {.size = 4096, .n_regular = 4000}};
  build_qwen3(spec, kTinyQwen3);
  spec.hparams.push_back({"pooling_type", kPoolingLast});
  return spec;
}

// Qwen3-Embedding-0.6B (config.json: hidden 1024, 28 layers, 16 query / 8 KV heads of head_dim
// 128, intermediate 3072, rope_theta 1e6, rms_norm_eps 1e-6, max_position_embeddings 32768, tied
// embeddings; sentence-transformers last-token pooling), with the large presets' Qwen vocabulary
// layout (151936 rows, <|endoftext|> at 151643).
ModelSpec qwen3_embed_0_6b() {
  ModelSpec spec{.preset = "qwen3-embed-0.6b", .display_name = "prefixd qwen3-embed-0.6b (random)",
                 .default_weight_type = "q8_0", .vocab = {.size = 151936, .n_regular = 151643}};
  build_qwen3(spec, {.n_embd = 1024, .n_layer = 28, .n_head = 16, .n_head_kv = 8, .head_dim = 128, .n_ff = 3072,
                     .n_ctx = 32768, .rope_base = 1000000.0f, .rms_eps = 1e-6f});
  spec.hparams.push_back({"pooling_type", kPoolingLast});
  return spec;
}

// tiny as Qwen3-Reranker is converted by llama.cpp's convert_hf_to_gguf.py. The reranker is a
// causal LM asked, through a prompt, whether a document answers a query; its score is the
// probability that the next token is "yes" rather than "no". The converter keeps only what that
// needs: qwen3.pooling_type RANK, qwen3.classifier.output_labels ["yes", "no"], and
// cls.output.weight, the LM head's rows for the "yes" and the "no" token stacked in that order
// (the head is the embedding table here: tied). libllama then takes the last token's state,
// multiplies it by those two rows and soft-maxes the pair; llama-server reports the first, P(yes).
// The prompt is a named chat template, tokenizer.chat_template.rerank (listed in
// tokenizer.chat_templates), with {query} and {document} for llama-server to fill in; the ChatML
// template stays the default one.
//
// tiny's merges have no "yes" or "no" token, so the rows are those of each answer's first token,
// the byte tokens "y" and "n" (a byte token's id is the byte's value).
ModelSpec tiny_qwen3_reranker() {
  ModelSpec spec{.preset = "tiny-qwen3-reranker", .display_name = "prefixd tiny-qwen3-reranker (random)",
                 .default_weight_type = "f32", .vocab = {.size = 4096, .n_regular = 4000}};
  build_qwen3(spec, kTinyQwen3);
  spec.hparams.push_back({"pooling_type", kPoolingRank});
  spec.hparams.push_back({"classifier.output_labels", std::vector<std::string>{"yes", "no"}});
  const TensorSpec& head = spec.tensors.front();  // token_embd.weight, the tied head
  RowsOf answers{head.name, std::get<Normal>(head.init), {'y', 'n'}};
  spec.tensors.push_back({"cls.output.weight", {kTinyQwen3.n_embd, 2}, std::move(answers), StorageClass::matrix});
  spec.metadata.push_back({"tokenizer.chat_template.rerank", std::string(rerank_template())});
  spec.metadata.push_back({"tokenizer.chat_templates", std::vector<std::string>{"rerank"}});
  return spec;
}

// ---- bert: a bidirectional encoder, as BERT / bge-small / all-MiniLM are converted ------------

struct BertShape {
  std::uint32_t n_embd, n_layer, n_head, n_ff, n_ctx;
  float norm_eps;
};

// LayerNorm: gain 1 and bias 0, as freshly initialised.
TensorSpec layer_norm_bias(std::string name, std::int64_t n) {
  return {std::move(name), {n}, Constant{0.0f}, StorageClass::f32};
}

// Post-norm blocks: x = LN(x + attention(x)); x = LN(x + FFN(x)), the FFN a GELU MLP; every linear
// map has a bias. Input: token + position + token type (segment) embeddings, layer-normed; the
// position table has one row per trained position (n_ctx), and libllama adds row 0 ("sentence
// A") of token_types to every token. bert.attention.causal false makes every token see the whole
// input; bert.pooling_type says how a sequence becomes one vector. WordPiece vocabulary.
void build_bert(ModelSpec& spec, const BertShape& s, std::uint32_t pooling) {
  spec.architecture = "bert";
  spec.vocab.kind = TokenizerKind::wordpiece;
  spec.hparams.push_back({"context_length", s.n_ctx});
  spec.hparams.push_back({"embedding_length", s.n_embd});
  spec.hparams.push_back({"feed_forward_length", s.n_ff});
  spec.hparams.push_back({"block_count", s.n_layer});
  spec.hparams.push_back({"attention.head_count", s.n_head});
  spec.hparams.push_back({"attention.layer_norm_epsilon", s.norm_eps});
  spec.hparams.push_back({"attention.causal", false});
  spec.hparams.push_back({"pooling_type", pooling});

  const std::int64_t n_embd = s.n_embd, n_ff = s.n_ff;
  spec.tensors.push_back(linear("token_embd.weight", n_embd, spec.vocab.size));
  // BERT's initializer range (0.02) for the position and segment tables; f32, as llama.cpp keeps them.
  spec.tensors.push_back({"token_types.weight", {n_embd, kBertTokenTypeCount}, Normal{0.02f}, StorageClass::f32});
  spec.tensors.push_back({"position_embd.weight", {n_embd, s.n_ctx}, Normal{0.02f}, StorageClass::f32});
  spec.tensors.push_back(norm("token_embd_norm.weight", n_embd));
  spec.tensors.push_back(layer_norm_bias("token_embd_norm.bias", n_embd));
  for (int il = 0; il < static_cast<int>(s.n_layer); ++il) {
    for (const char* proj : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
      spec.tensors.push_back(linear(blk(il, std::format("{}.weight", proj)), n_embd, n_embd));
      spec.tensors.push_back(bias(blk(il, std::format("{}.bias", proj)), n_embd));
    }
    spec.tensors.push_back(norm(blk(il, "attn_output_norm.weight"), n_embd));
    spec.tensors.push_back(layer_norm_bias(blk(il, "attn_output_norm.bias"), n_embd));
    spec.tensors.push_back(linear(blk(il, "ffn_up.weight"), n_embd, n_ff));
    spec.tensors.push_back(bias(blk(il, "ffn_up.bias"), n_ff));
    spec.tensors.push_back(linear(blk(il, "ffn_down.weight"), n_ff, n_embd));
    spec.tensors.push_back(bias(blk(il, "ffn_down.bias"), n_embd));
    spec.tensors.push_back(norm(blk(il, "layer_output_norm.weight"), n_embd));
    spec.tensors.push_back(layer_norm_bias(blk(il, "layer_output_norm.bias"), n_embd));
  }
}

// 64 wide (4 heads of 16), 2 blocks, a 4× FFN and BERT's 512 positions and 1e-12 epsilon.
const BertShape kTinyBert = {.n_embd = 64, .n_layer = 2, .n_head = 4, .n_ff = 256, .n_ctx = 512, .norm_eps = 1e-12f};

// A sentence-embedding model (all-MiniLM / bge-small style): mean pooling over all tokens,
// [CLS] and [SEP] included; llama-server L2-normalizes the mean.
ModelSpec tiny_bert() {
  ModelSpec spec{.preset = "tiny-bert", .display_name = "prefixd tiny-bert (random)", .default_weight_type = "f32",
                 .vocab = {.size = 4096}};
  build_bert(spec, kTinyBert, kPoolingMean);
  return spec;
}

// A cross-encoder reranker (bge-reranker style): query and document go in as one input,
// [CLS] query [SEP] document [SEP], and RANK pooling scores the [CLS] token's state with
// RoBERTa's classification head, which libllama's pooling computes as
// cls.output(tanh(cls(h_CLS))): cls maps n_embd to n_embd, cls.output to one logit, the score.
ModelSpec tiny_bert_reranker() {
  ModelSpec spec{.preset = "tiny-bert-reranker", .display_name = "prefixd tiny-bert-reranker (random)",
                 .default_weight_type = "f32", .vocab = {.size = 4096}};
  build_bert(spec, kTinyBert, kPoolingRank);
  const std::int64_t n_embd = kTinyBert.n_embd;
  spec.tensors.push_back(linear("cls.weight", n_embd, n_embd));
  spec.tensors.push_back(bias("cls.bias", n_embd));
  spec.tensors.push_back(linear("cls.output.weight", n_embd, 1));
  spec.tensors.push_back(bias("cls.output.bias", 1));
  return spec;
}

// ---- gemma3: sliding-window attention on 5 of every 6 layers, GELU FFN, sandwich norms --------

ModelSpec gemma3_tiny() {
  ModelSpec spec{.preset = "gemma3-tiny", .architecture = "gemma3", .display_name = "prefixd gemma3-tiny (random)",
                 .default_weight_type = "f16", .vocab = {.size = 4096, .n_regular = 4000}};
  constexpr std::uint32_t n_embd = 128, n_layer = 6, n_head = 4, n_head_kv = 2, head_dim = 32, n_ff = 256;
  // llama.cpp hard-codes Gemma 3's pattern (layers 0-4 of each 6 use the window, layer 5 is
  // global), so 6 layers give exactly one global layer. A small window lets tests cross it with
  // short prompts.
  constexpr std::uint32_t window = 64;
  add_common_hparams(spec, 8192, n_embd, n_layer, 1e-6f);
  spec.hparams.push_back({"feed_forward_length", n_ff});
  spec.hparams.push_back({"attention.head_count", n_head});
  spec.hparams.push_back({"attention.head_count_kv", n_head_kv});
  spec.hparams.push_back({"attention.key_length", head_dim});
  spec.hparams.push_back({"attention.value_length", head_dim});
  spec.hparams.push_back({"attention.sliding_window", window});
  spec.hparams.push_back({"rope.freq_base", 1000000.0f});  // global layers; local ones use 10000

  add_embeddings(spec, n_embd, /*tied=*/true);  // Gemma always ties the output head
  for (int il = 0; il < static_cast<int>(n_layer); ++il) {
    spec.tensors.push_back(norm(blk(il, "attn_norm.weight"), n_embd));
    spec.tensors.push_back(linear(blk(il, "attn_q.weight"), n_embd, head_dim * n_head));
    spec.tensors.push_back(linear(blk(il, "attn_k.weight"), n_embd, head_dim * n_head_kv));
    spec.tensors.push_back(linear(blk(il, "attn_v.weight"), n_embd, head_dim * n_head_kv));
    spec.tensors.push_back(norm(blk(il, "attn_q_norm.weight"), head_dim));
    spec.tensors.push_back(norm(blk(il, "attn_k_norm.weight"), head_dim));
    spec.tensors.push_back(linear(blk(il, "attn_output.weight"), head_dim * n_head, n_embd));
    spec.tensors.push_back(norm(blk(il, "post_attention_norm.weight"), n_embd));
    spec.tensors.push_back(norm(blk(il, "ffn_norm.weight"), n_embd));
    spec.tensors.push_back(linear(blk(il, "ffn_gate.weight"), n_embd, n_ff));
    spec.tensors.push_back(linear(blk(il, "ffn_up.weight"), n_embd, n_ff));
    spec.tensors.push_back(linear(blk(il, "ffn_down.weight"), n_ff, n_embd));
    spec.tensors.push_back(norm(blk(il, "post_ffw_norm.weight"), n_embd));
  }
  return spec;
}

// ---- mamba2: pure selective-state-space recurrence, no attention, no FFN ----------------------

// SSM parameters chosen so the recurrence is stable: A < 0 makes exp(dt * A) a decay in (0, 1);
// dt = softplus(dt_bias + ...) starts in Mamba's [1e-3, 1e-1] range; D = 1 is the skip path.
TensorSpec ssm_a(std::string name, std::vector<std::int64_t> ne) {
  return {std::move(name), std::move(ne), Uniform{-16.0f, -1.0f}, StorageClass::f32};
}
TensorSpec ssm_dt_bias(std::string name, std::int64_t n) {
  return {std::move(name), {n}, InverseSoftplusLogUniform{1e-3f, 1e-1f}, StorageClass::f32};
}
// Depthwise causal conv kernel: fan-in is the kernel width.
TensorSpec conv_kernel(std::string name, std::int64_t width, std::int64_t channels) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(width));
  return {std::move(name), {width, channels}, Uniform{-bound, bound}, StorageClass::f32};
}

ModelSpec mamba2_tiny() {
  ModelSpec spec{.preset = "mamba2-tiny", .architecture = "mamba2", .display_name = "prefixd mamba2-tiny (random)",
                 .default_weight_type = "f32", .vocab = {.size = 4096, .n_regular = 4000}};
  constexpr std::uint32_t n_embd = 128, n_layer = 4;
  constexpr std::uint32_t d_inner = 2 * n_embd, d_state = 64, n_group = 1, head_dim = 64, d_conv = 4;
  constexpr std::uint32_t n_head = d_inner / head_dim;  // GGUF calls it ssm.time_step_rank
  add_common_hparams(spec, 8192, n_embd, n_layer, 1e-5f);
  // Attention and FFN sizes are zero, exactly as llama.cpp's converter writes them for Mamba.
  spec.hparams.push_back({"feed_forward_length", std::uint32_t{0}});
  spec.hparams.push_back({"attention.head_count", std::uint32_t{0}});
  spec.hparams.push_back({"attention.head_count_kv", std::uint32_t{0}});
  spec.hparams.push_back({"ssm.conv_kernel", d_conv});
  spec.hparams.push_back({"ssm.inner_size", d_inner});
  spec.hparams.push_back({"ssm.state_size", d_state});
  spec.hparams.push_back({"ssm.time_step_rank", n_head});
  spec.hparams.push_back({"ssm.group_count", n_group});

  // in_proj produces [z (d_inner), x (d_inner), B (n_group*d_state), C (n_group*d_state), dt (n_head)];
  // the conv runs over x, B and C.
  const std::int64_t d_in_proj = 2 * d_inner + 2 * n_group * d_state + n_head;
  const std::int64_t conv_channels = d_inner + 2 * n_group * d_state;
  add_embeddings(spec, n_embd, /*tied=*/false);
  for (int il = 0; il < static_cast<int>(n_layer); ++il) {
    spec.tensors.push_back(norm(blk(il, "attn_norm.weight"), n_embd));
    spec.tensors.push_back(linear(blk(il, "ssm_in.weight"), n_embd, d_in_proj));
    spec.tensors.push_back(conv_kernel(blk(il, "ssm_conv1d.weight"), d_conv, conv_channels));
    spec.tensors.push_back({blk(il, "ssm_conv1d.bias"), {conv_channels}, Constant{0.0f}, StorageClass::f32});
    spec.tensors.push_back(ssm_dt_bias(blk(il, "ssm_dt.bias"), n_head));
    spec.tensors.push_back(ssm_a(blk(il, "ssm_a"), {1, n_head}));
    spec.tensors.push_back({blk(il, "ssm_d"), {1, n_head}, Constant{1.0f}, StorageClass::f32});
    spec.tensors.push_back({blk(il, "ssm_norm.weight"), {d_inner / n_group, n_group}, Constant{1.0f}, StorageClass::f32});
    spec.tensors.push_back(linear(blk(il, "ssm_out.weight"), d_inner, n_embd));
  }
  return spec;
}

// ---- qwen35: Qwen3.5-style hybrid, gated delta-net layers with one gated-attention layer in 4 --

struct Qwen35Shape {
  std::uint32_t n_embd, n_layer, full_attention_interval, n_ff, n_ctx;
  // Gated attention: n_head query heads over n_head_kv KV heads of head_dim; RoPE on the first
  // n_rot dimensions of each head, split into multi-section RoPE `sections` (frequency pairs).
  std::uint32_t n_head, n_head_kv, head_dim, n_rot;
  std::vector<std::int32_t> sections;
  float rope_base, rms_eps;
  // Gated delta net: n_k_heads (GGUF group_count) key heads shared by n_v_heads (time_step_rank)
  // value heads; keys and values are both d_state wide per head.
  std::uint32_t d_state, n_k_heads, n_v_heads, d_conv;
};

void build_qwen35(ModelSpec& spec, const Qwen35Shape& s) {
  spec.architecture = "qwen35";
  const std::uint32_t key_dim = s.d_state * s.n_k_heads, value_dim = s.d_state * s.n_v_heads;
  add_common_hparams(spec, s.n_ctx, s.n_embd, s.n_layer, s.rms_eps);
  spec.hparams.push_back({"feed_forward_length", s.n_ff});
  spec.hparams.push_back({"attention.head_count", s.n_head});
  spec.hparams.push_back({"attention.head_count_kv", s.n_head_kv});
  spec.hparams.push_back({"attention.key_length", s.head_dim});
  spec.hparams.push_back({"attention.value_length", s.head_dim});
  spec.hparams.push_back({"rope.dimension_count", s.n_rot});
  // For text all sections see the same position, so this is plain partial RoPE.
  spec.hparams.push_back({"rope.dimension_sections", s.sections});
  spec.hparams.push_back({"rope.freq_base", s.rope_base});
  spec.hparams.push_back({"full_attention_interval", s.full_attention_interval});
  spec.hparams.push_back({"ssm.conv_kernel", s.d_conv});
  spec.hparams.push_back({"ssm.inner_size", value_dim});
  spec.hparams.push_back({"ssm.state_size", s.d_state});
  spec.hparams.push_back({"ssm.time_step_rank", s.n_v_heads});
  spec.hparams.push_back({"ssm.group_count", s.n_k_heads});

  add_embeddings(spec, s.n_embd, /*tied=*/true);
  const std::int64_t n_embd = s.n_embd, n_ff = s.n_ff, head_dim = s.head_dim;
  for (int il = 0; il < static_cast<int>(s.n_layer); ++il) {
    spec.tensors.push_back(norm(blk(il, "attn_norm.weight"), n_embd));
    if ((il + 1) % s.full_attention_interval == 0) {
      // Gated attention: attn_q yields the queries and an output gate of the same size.
      spec.tensors.push_back(linear(blk(il, "attn_q.weight"), n_embd, 2 * head_dim * s.n_head));
      spec.tensors.push_back(linear(blk(il, "attn_k.weight"), n_embd, head_dim * s.n_head_kv));
      spec.tensors.push_back(linear(blk(il, "attn_v.weight"), n_embd, head_dim * s.n_head_kv));
      spec.tensors.push_back(norm(blk(il, "attn_q_norm.weight"), head_dim));
      spec.tensors.push_back(norm(blk(il, "attn_k_norm.weight"), head_dim));
      spec.tensors.push_back(linear(blk(il, "attn_output.weight"), head_dim * s.n_head, n_embd));
    } else {
      spec.tensors.push_back(linear(blk(il, "attn_qkv.weight"), n_embd, 2 * key_dim + value_dim));
      spec.tensors.push_back(linear(blk(il, "attn_gate.weight"), n_embd, value_dim));
      spec.tensors.push_back(conv_kernel(blk(il, "ssm_conv1d.weight"), s.d_conv, 2 * key_dim + value_dim));
      spec.tensors.push_back(ssm_dt_bias(blk(il, "ssm_dt.bias"), s.n_v_heads));
      spec.tensors.push_back(ssm_a(blk(il, "ssm_a"), {s.n_v_heads}));
      spec.tensors.push_back(linear(blk(il, "ssm_alpha.weight"), n_embd, s.n_v_heads));
      spec.tensors.push_back(linear(blk(il, "ssm_beta.weight"), n_embd, s.n_v_heads));
      spec.tensors.push_back(norm(blk(il, "ssm_norm.weight"), s.d_state));
      spec.tensors.push_back(linear(blk(il, "ssm_out.weight"), value_dim, n_embd));
    }
    spec.tensors.push_back(norm(blk(il, "post_attention_norm.weight"), n_embd));
    spec.tensors.push_back(linear(blk(il, "ffn_gate.weight"), n_embd, n_ff));
    spec.tensors.push_back(linear(blk(il, "ffn_up.weight"), n_embd, n_ff));
    spec.tensors.push_back(linear(blk(il, "ffn_down.weight"), n_ff, n_embd));
  }
}

ModelSpec qwen35_tiny() {
  ModelSpec spec{.preset = "qwen35-tiny", .display_name = "prefixd qwen35-tiny (random)",
                 .default_weight_type = "f32", .vocab = {.size = 4096, .n_regular = 4000}};
  build_qwen35(spec, {.n_embd = 128, .n_layer = 4, .full_attention_interval = 4, .n_ff = 256, .n_ctx = 8192,
                      .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_rot = 16, .sections = {3, 3, 2, 0},
                      .rope_base = 10000000.0f, .rms_eps = 1e-6f,
                      .d_state = 32, .n_k_heads = 2, .n_v_heads = 4, .d_conv = 4});
  return spec;
}

// Qwen3.5-0.8B (Qwen/Qwen3.5-0.8B, text model, config.json "text_config", Feb 2026): hidden 1024,
// 24 layers with full_attention_interval 4 (18 gated delta-net + 6 gated attention), intermediate
// 3584; attention 8 heads / 2 KV heads of head_dim 256, partial_rotary_factor 0.25 (64 rotary
// dims, mrope_section [11, 11, 10]), rope_theta 1e7, rms_norm_eps 1e-6; linear attention 16 key
// heads and 16 value heads of 128 (linear_key_head_dim = linear_value_head_dim), conv kernel 4;
// vocab 248320 with <|endoftext|> at 248044 (so 248044 regular tokens), tied embeddings,
// max_position_embeddings 262144. GGUF mapping as llama.cpp's converter writes it: ssm.state_size =
// linear_key_head_dim, ssm.group_count = linear_num_key_heads, ssm.time_step_rank =
// linear_num_value_heads, ssm.inner_size = linear_value_head_dim * linear_num_value_heads,
// rope.dimension_count = head_dim * partial_rotary_factor. The MTP head and the vision tower are
// left out (llama.cpp's text model does not use them).
ModelSpec qwen35_0_8b() {
  ModelSpec spec{.preset = "qwen35-0.8b", .display_name = "prefixd qwen35-0.8b (random)",
                 .default_weight_type = "q8_0", .vocab = {.size = 248320, .n_regular = 248044}};
  build_qwen35(spec, {.n_embd = 1024, .n_layer = 24, .full_attention_interval = 4, .n_ff = 3584, .n_ctx = 262144,
                      .n_head = 8, .n_head_kv = 2, .head_dim = 256, .n_rot = 64, .sections = {11, 11, 10, 0},
                      .rope_base = 10000000.0f, .rms_eps = 1e-6f,
                      .d_state = 128, .n_k_heads = 16, .n_v_heads = 16, .d_conv = 4});
  return spec;
}

struct PresetEntry {
  PresetInfo info;
  ModelSpec (*build)();
};

const std::vector<PresetEntry>& preset_table() {
  // Immutable after first use; the order is the order `presets()` lists them in.
  static const std::vector<PresetEntry> table = {
      {{"tiny", "qwen2", "qwen2 dense, 64 wide, 2 layers, 4096-token vocab, f32 (~2.4 MB); for tests"}, tiny},
      {{"qwen2-0.5b", "qwen2", "Qwen2.5-0.5B shapes: 896 wide, 24 layers, 14/2 heads, 151936 vocab, q8_0 (~530 MB)"},
       qwen2_0_5b},
      {{"qwen2-7b", "qwen2",
        "Qwen2.5-7B shapes: 3584 wide, 28 layers, 28/4 heads, 152064 vocab, q8_0 (~8 GB); for GPU benchmarks"},
       qwen2_7b},
      {{"tiny-qwen2vl", "qwen2vl",
        "tiny's shapes and vocabulary as a Qwen2-VL text model (M-RoPE, sections 2/3/3), f32; pairs with the Qwen2-VL projectors"},
       tiny_qwen2vl},
      {{"qwen2vl-7b", "qwen2vl",
        "Qwen2-VL-7B text shapes: 3584 wide, 28 layers, 28/4 heads, M-RoPE 16/24/24, 152064 vocab, q8_0 (~8 GB)"},
       qwen2vl_7b},
      {{"tiny-qwen3vl", "qwen3vl",
        "tiny's width, vocabulary and template as a Qwen3-VL text model (q/k norms, interleaved M-RoPE 3/3/2, no deepstack), f32; pairs with tiny-qwen3vl-mmproj"},
       tiny_qwen3vl},
      {{"qwen3vl-2b", "qwen3vl",
        "Qwen3-VL-2B text shapes: 2048 wide, 28 layers, 16/8 heads of 128, interleaved M-RoPE 24/20/20, deepstack 3, 151936 vocab, tied, q8_0 (~1.8 GB)"},
       qwen3vl_2b},
      {{"tiny-embed", "qwen3",
        "Qwen3-Embedding style: tiny's width and vocabulary in Qwen3's layout, last-token pooling, tied, f32"},
       tiny_embed},
      {{"qwen3-embed-0.6b", "qwen3",
        "Qwen3-Embedding-0.6B shapes: 1024 wide, 28 layers, 16/8 heads of 128, last-token pooling, 151936 vocab, q8_0 (~640 MB)"},
       qwen3_embed_0_6b},
      {{"tiny-qwen3-reranker", "qwen3",
        "Qwen3-Reranker style: tiny-embed's layout, RANK pooling over a yes/no classifier from the head, rerank prompt template, f32"},
       tiny_qwen3_reranker},
      {{"tiny-bert", "bert",
        "BERT sentence encoder: 64 wide, 2 bidirectional layers, 4096-piece WordPiece vocab, mean pooling, 512 positions, f32"},
       tiny_bert},
      {{"tiny-bert-reranker", "bert",
        "tiny-bert as a cross-encoder reranker: RANK pooling of [CLS] through a classification head, f32"},
       tiny_bert_reranker},
      {{"gemma3-tiny", "gemma3", "Gemma 3 style: 5 sliding-window (64 tokens) + 1 global layer, 128 wide, f16"},
       gemma3_tiny},
      {{"mamba2-tiny", "mamba2", "Mamba-2 recurrent: 4 SSM layers, 128 wide, state 64, f32"}, mamba2_tiny},
      {{"qwen35-tiny", "qwen35", "Qwen3.5 style hybrid: 3 gated delta-net layers + 1 gated attention, 128 wide, f32"},
       qwen35_tiny},
      {{"qwen35-0.8b", "qwen35",
        "Qwen3.5-0.8B shapes: 1024 wide, 18 gated delta-net + 6 attention layers, 248320 vocab, q8_0 (~810 MB)"},
       qwen35_0_8b},
  };
  return table;
}

}  // namespace

std::vector<PresetInfo> presets() {
  std::vector<PresetInfo> out;
  for (const auto& entry : preset_table()) {
    out.push_back(entry.info);
  }
  for (const auto& entry : projector_presets()) out.push_back({entry.name, "clip", entry.summary});
  return out;
}

ModelSpec make_spec(const std::string& preset) {
  for (const auto& entry : preset_table()) {
    if (entry.info.name == preset) {
      return entry.build();
    }
  }
  for (const auto& entry : projector_presets()) {
    if (entry.name == preset) return entry.build();
  }
  std::string known;
  for (const auto& entry : preset_table()) {
    known += (known.empty() ? "" : ", ") + entry.info.name;
  }
  for (const auto& entry : projector_presets()) known += ", " + entry.name;
  throw std::runtime_error(std::format("unknown model preset '{}' (known presets: {})", preset, known));
}

}  // namespace prefixd::modelgen
