// prefixd engine — value types shared by everything that talks to the model runtime.
// This header does not include llama.h; only src/engine/*.cpp do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prefixd::engine {

using Token = std::int32_t;
using SeqId = std::int32_t;
using Pos = std::int32_t;

// How a model's per-sequence memory can be reused, decided from GGUF metadata at load.
enum class ModelFamily {
  dense,           // every layer is full attention: K/V can be trimmed to any earlier token
  sliding_window,  // some layers attend over a window: exact reuse only while inside it
  recurrent,       // every layer keeps a fixed-size state: reuse only at snapshot positions
  hybrid,          // attention and recurrent layers mixed: as recurrent
};

const char* family_name(ModelFamily family);

// How an embedding is pooled from the outputs of a sequence's tokens (llama.cpp's pooling types):
// `model` asks for the model's own (its GGUF's pooling_type); none gives one vector per token;
// mean, cls (the first token) and last pool one per sequence; rank runs a reranker's classifier
// head over it (a relevance score per class).
enum class Pooling { model, none, mean, cls, last, rank };
const char* pooling_name(Pooling pooling);
std::optional<Pooling> parse_pooling(std::string_view name);

// A LoRA adapter loaded with the model (ContextOptions::lora_paths).
struct AdapterInfo {
  std::string path;
  std::string name;         // the file name without its extension
  // XXH3-128 of the adapter file, as ModelInfo::fingerprint is of the model's: what names the
  // adapter in a cache namespace, so K/V it changed is reused only under the same file.
  std::string fingerprint;
  float alpha = 0;          // adapter.lora.alpha (0: the file gives none; libllama then scales by 1)
};

// An adapter (by ModelInfo::adapters index) and the scale it applies at.
struct AdapterScale {
  std::int32_t id = 0;
  float scale = 1.0f;
  friend bool operator==(const AdapterScale&, const AdapterScale&) = default;
};

struct ModelInfo {
  std::string id;            // display id, the file name without extension unless overridden
  std::string path;
  std::string architecture;  // general.architecture
  std::string description;   // llama_model_desc
  ModelFamily family = ModelFamily::dense;
  std::int32_t n_ctx_train = 0;
  std::int32_t n_embd = 0;
  std::int32_t n_layer = 0;
  std::int32_t n_head = 0;
  std::int32_t n_head_kv = 0;
  std::int32_t n_vocab = 0;
  std::int32_t sliding_window = 0;   // 0 when the model has no sliding-window layers
  std::int32_t n_swa_layers = 0;     // layers that attend over the window only
  std::size_t kv_bytes_per_token = 0;  // K+V bytes one token occupies in the attention cache
  std::uint64_t n_params = 0;
  std::uint64_t model_bytes = 0;
  std::string chat_template;  // tokenizer.chat_template, empty when the file has none
  // XXH3-128 of every byte of the GGUF file (metadata and tensor data), 32 hex characters: the
  // same file gives the same fingerprint in any process, files with different weights never do
  // (see model_fingerprint.h). Set by load_llama_engine and inspect_model.
  std::string fingerprint;
  // Everything about the context that changes the K/V values or their serialized layout (KV cache
  // types, RoPE settings in effect, flash attention, the full window cache, libllama's version):
  // with the fingerprint, what decides whether stored K/V can be restored here. Set when the
  // context is created; empty from inspect_model.
  std::string runtime_signature;
  // False for architectures whose memory aborts the process on a copy of part of a sequence
  // (libllama asserts instead of returning an error): the prompt cache stays off for them.
  bool partial_copy_supported = true;
  // Gated delta-net layers (qwen35, qwen3next, kimi-linear) compute several tokens of a sequence
  // with a chunked algorithm and a lone token with the recurrence itself: the same tokens give
  // other bits in one call than decoded one by one (a verified draft is not a decoded one).
  bool recurrence_in_chunks = false;
  // Set when the context is created. True: one pool of cells that every sequence shares, and a
  // copy between sequences shares cells at no cost. False: a KV stream per sequence
  // (ContextOptions::kv_layout), where a copy duplicates the source's cells and its
  // destination may already hold only a prefix of what the source holds (Engine::copy_sequence).
  bool cells_shared = true;
  // Set when the context is created: sliding-window layers keep every cell (libllama's swa_full),
  // so their cells can be cut back and copied like full attention.
  bool swa_full = false;
  // With the full window cache, libllama still lets a decode take over a cell that one sequence
  // owns once it lies outside that owner's window. This extra sequence id and the next one (beyond
  // the sequences ContextOptions asked for) co-own every cell the prompt cache relies on, so none
  // is ever single-owned (src/cache/cell_pin.h). -1 when the model needs none.
  SeqId window_pin = -1;
  // Layers (and their KV cells) were offloaded to a GPU device; false when everything runs on the
  // CPU. Decides the device tier's default budget (see serve --prompt-cache-device-cells).
  bool on_accelerator = false;
  // Where the model runs, set with the context: the GPU devices libllama splits offloaded layers
  // over (name, backend, description), their memory, and how many of the model's layers (its
  // repeating layers and the output layer) went there; the rest, and everything without a GPU
  // device, runs on the CPU. A repeating layer on a device keeps its K/V there.
  struct Placement {
    std::vector<std::string> devices;    // "Vulkan0 (Vulkan: llvmpipe ..., 24105 MiB, 23155 MiB free)"
    std::uint64_t device_memory_bytes = 0;  // the devices' total memory
    std::int32_t layers_offloaded = 0;      // repeating layers on the devices
    bool output_offloaded = false;
    std::uint64_t kv_device_bytes = 0;      // the context's K/V that lives in device memory
  } placement;
  // False for a model whose context keeps no memory (an encoder such as BERT, attending both
  // ways): each call sees only its own tokens, so a prompt is computed in one call and nothing of
  // it can be kept. Set when the context is created.
  bool has_memory = true;
  // Set when the context is created with ContextOptions::embeddings: the pooling in effect (never
  // `model`), and how many floats Engine::embedding gives (the output width, or the classes of a
  // reranker's head under rank).
  bool embeddings = false;
  Pooling pooling = Pooling::none;
  std::int32_t embedding_width = 0;
  // The LoRA adapters loaded with the model (ContextOptions::lora_paths), by id: their index.
  std::vector<AdapterInfo> adapters;
};

// True when a sequence's whole memory is attention K/V that can be cut back to any earlier
// position (dense models, and sliding-window models whose window cache keeps every cell). The
// other families reuse a prefix only where a checkpoint of their partial state exists.
inline bool memory_is_trimmable(const ModelInfo& info) {
  return info.family == ModelFamily::dense || (info.family == ModelFamily::sliding_window && info.swa_full);
}

// True when some layers keep attention K/V cells (everything but a pure recurrent model): those
// cells are shared between sequences and stored in the host tier by position.
inline bool has_attention_cells(const ModelInfo& info) { return info.family != ModelFamily::recurrent; }

enum class SwaFull { automatic, on, off };

enum class KvLayout { pool, streams, automatic };

struct ContextOptions {
  // Total cells of the unified KV cache. 0: the model's training context when its K/V fits in
  // kv_memory_budget, else the largest that fits (fit_context_size).
  std::int32_t n_ctx = 0;
  std::uint64_t kv_memory_budget = 4ull << 30;  // read only when n_ctx is 0
  std::int32_t n_batch = 512;     // most tokens decoded in one call
  std::int32_t n_parallel = 4;    // sequences that run requests
  std::int32_t n_holder_seqs = 4; // extra sequence ids reserved for the prompt cache
  // With a stream per sequence (kv_layout), at most this many of those ids, each a whole stream of
  // the context's cells (the scheduler keeps as many holders as the engine has ids); -1: as many.
  std::int32_t n_holder_seqs_streams = -1;
  std::int32_t n_threads = 0;     // 0: all hardware threads
  // On by default, as llama.cpp's `auto` resolves on the CPU: half the prefill time of a long
  // prompt there, and V is stored untransposed, which host-tier restores copy in whole rows.
  bool flash_attention = true;
  std::int32_t gpu_layers = 0;
  // Every prompt row is computed in a row-wise call (Engine::rowwise_rows), in chunks that begin
  // at multiples of that size, and the weights are not repacked: what the model computes for a
  // position no longer depends on how the prompt was split, so every kind of cache hit gives the
  // cold answer. Slower prefill; changes the K/V a prompt leaves (a runtime signature field).
  bool deterministic = false;
  // Sliding-window models only: whether the window layers keep every cell. automatic: on while
  // the full cache costs at most swa_full_max_bytes (see load_llama_engine).
  SwaFull swa_full = SwaFull::automatic;
  std::uint64_t swa_full_max_bytes = 2ull << 30;
  // One KV stream per sequence id (libllama's non-unified cache), each of n_ctx cells, instead of
  // one pool all sequences share: a sequence's cells then lie from cell 0 of its own stream in
  // position order, whatever the others hold (prefixd_stream_probe measures what that changes),
  // and copying between sequences duplicates cells (ModelInfo::cells_shared is false). Models
  // with attention cells only (dense, sliding-window, hybrid): load_llama_engine refuses `streams`
  // for a recurrent one. `automatic`: streams when deterministic on such a model (where they make
  // every answer independent of the others' cells), else the pool.
  KvLayout kv_layout = KvLayout::pool;
  // A vision projector (GGUF, libmtmd's format) to load with the model: images in prompts. Empty:
  // text only.
  std::string mmproj_path;
  std::uint64_t max_image_pixels = 0;  // width × height an image may have; 0: the default (mtmd_vision.h)
  double max_audio_seconds = 0;        // the longest audio clip; 0: the default (mtmd_vision.h)
  // Text file remembering model file digests across restarts (model_fingerprint.h); empty: the
  // file is hashed at every load.
  std::string fingerprint_cache;
  // Compute embeddings instead of logits (an embedding or reranking server, --embeddings): the
  // context outputs pooled vectors (or each token's, under Pooling::none) and generates nothing.
  bool embeddings = false;
  Pooling pooling = Pooling::model;  // read only with embeddings
  // LoRA adapters (GGUF, libllama's format) to load for the model (--lora): none applies until
  // Engine::use_adapters says so.
  std::vector<std::string> lora_paths;
};

// The context size ContextOptions::n_ctx = 0 asks for: the model's training context (or
// kFallbackContextSize when the file does not say) when its K/V (kv_bytes_per_token per cell)
// fits in `kv_memory_budget`; else the largest multiple of 256 cells that fits, at least
// kMinFittedContextSize.
inline constexpr std::int32_t kFallbackContextSize = 16384;
inline constexpr std::int32_t kMinFittedContextSize = 2048;
struct ContextFit {
  std::int32_t n_ctx = 0;
  bool limited_by_memory = false;  // smaller than the training context because the K/V would not fit
};
ContextFit fit_context_size(const ModelInfo& info, std::uint64_t kv_memory_budget);

// One token of a batch: which sequence it extends, at which position, whether its logits are read.
struct BatchToken {
  Token token = 0;
  Pos pos = 0;
  SeqId seq = 0;
  bool logits = false;
};

struct PosRange {
  Pos min = -1;  // first position held, -1 when the sequence is empty
  Pos max = -1;  // last position held, -1 when the sequence is empty
  bool empty() const { return max < 0; }
  Pos count() const { return empty() ? 0 : max - min + 1; }
};

// A GBNF grammar (llama.cpp's grammar format) that every sampled token must keep the output inside.
// Generation under a grammar ends with an end-of-generation token exactly when the output is a
// complete sentence of the grammar that no token can extend, or earlier when the model picks one
// where the grammar allows it to end.
struct Grammar {
  std::string text;         // the rules
  std::string root = "root";  // the start rule
  friend bool operator==(const Grammar&, const Grammar&) = default;
};

// A request's seed that asks for a random one (llama.cpp's -1).
inline constexpr std::uint32_t kRandomSeed = 0xFFFFFFFFu;

struct SamplingParams {
  float temperature = 0.8f;
  float top_p = 0.95f;
  std::int32_t top_k = 40;
  float min_p = 0.05f;
  std::uint32_t seed = kRandomSeed;
  // End-of-generation tokens are never drawn (their logits are masked), so a reply runs to its
  // token limit or a stop string: what serving benchmarks ask for to fix the output length.
  bool ignore_eos = false;
  // REQUIRES: Engine::check_grammar accepted it (make_sampler throws std::invalid_argument if not).
  std::optional<Grammar> grammar;
};

using Bytes = std::vector<std::uint8_t>;

}  // namespace prefixd::engine
