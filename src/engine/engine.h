// prefixd engine — the narrow interface between prefixd and a model runtime.
//
// Owns: the model, its vocabulary, one inference context with a unified KV cache, batches and
// samplers. The scheduler thread is the only caller of the mutating methods (decode, sequence
// ops, state I/O); the vocabulary methods are safe from any thread. The cache and the scheduler
// see only this interface, so a FakeEngine (tests/support/fake_engine.h) can stand in for tests.
// Must not know: HTTP, requests, the prompt cache's data structures.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/types.h"
#include "engine/vision.h"

namespace prefixd::engine {

// A byte range [begin, end) of a text.
struct TextRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  friend bool operator==(const TextRange&, const TextRange&) = default;
};

// How many bytes of text one token can stand for: what lets a text's length bound its token count
// from below without tokenizing it. Every byte of a text is spelled by exactly one token of its
// tokenization (the tokenizer loses nothing), except the whitespace that a special token with a
// strip attribute swallows beside it when special tokens are parsed.
struct TokenSpan {
  std::size_t max_bytes = 1;           // the longest text one token stands for (> 0)
  bool strips_whitespace = false;      // some special token swallows the whitespace beside it
};

// The tokens a fill-in-the-middle prompt is built from (a coder model's vocabulary): nullopt from
// Vocabulary::infill_tokens() unless the model has the prefix, suffix and middle markers.
struct InfillTokens {
  Token prefix = 0;
  Token suffix = 0;
  Token middle = 0;
  std::optional<Token> repository;      // opens the repository-level context of extra files
  std::optional<Token> file_separator;  // opens each file of it
  std::optional<Token> begin;           // BOS, when the model's tokenizer adds one
};

// Thread-safe, read-only view of the model's tokenizer.
class Vocabulary {
 public:
  virtual ~Vocabulary() = default;
  // add_special: prepend BOS etc. as the model asks; parse_special: "<|im_start|>" becomes one token.
  virtual std::vector<Token> tokenize(std::string_view text, bool add_special, bool parse_special) const = 0;
  // As tokenize(text, add_special, parse_special = true), except that no control token is
  // recognised inside the `literal` ranges: their bytes are tokenized as text, together with the
  // text around them. `literal` is sorted and non-overlapping. With no ranges it is exactly
  // tokenize(text, add_special, true). Throws std::logic_error when ranges are given to a
  // vocabulary whose control_texts() is empty.
  virtual std::vector<Token> tokenize_with_literals(std::string_view text, bool add_special,
                                                    std::span<const TextRange> literal) const = 0;
  // The texts that parse_special turns into control tokens ("<|im_end|>", "<unk>"...), longest
  // first; empty when this vocabulary cannot keep them as text (tokenize_with_literals).
  virtual const std::vector<std::string>& control_texts() const = 0;
  // The bound on bytes per token, or nullopt for a tokenizer that can fold text away (WordPiece,
  // Unigram normalize it), whose token counts the text's length does not bound.
  virtual std::optional<TokenSpan> token_span() const = 0;
  // The bytes one token stands for (special tokens rendered only when render_special).
  virtual std::string piece(Token token, bool render_special = false) const = 0;
  // True for end-of-generation tokens (EOS, EOT, <|im_end|>...).
  virtual bool is_end_of_generation(Token token) const = 0;
  virtual std::int32_t size() const = 0;
  // The model's fill-in-the-middle markers (from its GGUF metadata, or recognised by their text).
  virtual std::optional<InfillTokens> infill_tokens() const { return std::nullopt; }
  // The tokens a reranker reads for one (query, document) pair: the model's rerank template
  // (tokenizer.chat_template.rerank) with {query} and {document} filled in, special tokens parsed,
  // when it has one; else [BOS] query [EOS] [SEP] document [EOS], each marker where the
  // vocabulary adds it (a cross-encoder's pair). This default: the query with the vocabulary's
  // markers, then the document.
  virtual std::vector<Token> rerank_tokens(std::string_view query, std::string_view document) const {
    std::vector<Token> tokens = tokenize(query, true, false);
    const std::vector<Token> doc = tokenize(document, false, false);
    tokens.insert(tokens.end(), doc.begin(), doc.end());
    return tokens;
  }
};

// A sampler chain built for one request; owned by the scheduler and used only on its thread.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // Samples from the logits of batch row `row` of the last decode, and records the choice. Under a
  // grammar only tokens the grammar allows are drawn; once the output is complete and nothing can
  // extend it, the only token allowed is an end-of-generation token.
  virtual Token sample(std::int32_t row) = 0;
  // The same draw in two halves, so that the costly half can leave the engine's thread. The quick
  // half draws from row `row` as sample() does when that is cheap: without a grammar, or when the
  // grammar allows the unconstrained draw. nullopt when the grammar refused it: then the token
  // must come from sample_masked over a copy of the same row's logits, which walks the grammar
  // over the whole vocabulary. sample_masked may run on any thread, never concurrently with
  // another call on this sampler; the pair draws what sample() would.
  virtual std::optional<Token> sample_quick(std::int32_t row) { return sample(row); }
  virtual Token sample_masked(std::span<const float> /*logits*/) {
    throw std::logic_error("sample_masked: this sampler never defers a draw");
  }
  // Under a grammar: true once a sample() found no token the grammar allows (a grammar this
  // vocabulary cannot spell). That sample() returned an end-of-generation token although the
  // output is not a complete sentence of the grammar; the caller should fail the request.
  virtual bool grammar_stuck() const { return false; }
};

enum class DecodeStatus { ok, no_kv_space, aborted, error };

class Engine {
 public:
  virtual ~Engine() = default;

  virtual const ModelInfo& model() const = 0;
  virtual const Vocabulary& vocab() const = 0;
  virtual std::int32_t context_size() const = 0;   // KV cells one sequence can hold (the pool all share)
  virtual std::int32_t batch_size() const = 0;     // most tokens one decode() accepts
  virtual std::int32_t sequence_count() const = 0; // valid sequence ids are [0, sequence_count())
  // The most rows a decode() may hold while each row is computed on its own, by the same kernels
  // in the same order whatever else the call holds: a row's result then depends only on its own
  // sequence's cells (and their order), not on the batch around it. 0: no such bound is known.
  // A lone row takes other kernels than the rows of a larger call: decode_padded() pads it with a
  // row of a sequence of its own (so does decode() when deterministic()). The scheduler computes
  // every prompt's last token in such calls, so that a cached prompt and a cold one compute it
  // alike.
  virtual std::int32_t rowwise_rows() const { return 0; }
  // Whether every prompt row is computed in row-wise calls at positions aligned to rowwise_rows()
  // (ContextOptions::deterministic).
  virtual bool deterministic() const { return false; }

  // The LoRA adapters (ModelInfo::adapters ids, each at most once, scale not 0) every following
  // decode applies, until the next call; empty: the base model. A call computes one set: requests
  // under other sets take calls of their own. Throws std::invalid_argument for an unknown id.
  virtual void use_adapters(std::span<const AdapterScale> adapters) {
    if (!adapters.empty()) throw std::invalid_argument("this engine loads no LoRA adapters");
  }

  // Runs the model over `batch` (at most batch_size() tokens). After ok, logits(row) is valid for
  // every row whose BatchToken::logits was set, until the next decode. On failure the KV cache
  // holds no partial result of this batch.
  virtual DecodeStatus decode(std::span<const BatchToken> batch) = 0;
  // As decode(), and a batch of one row is computed as a row-wise call (rowwise_rows).
  virtual DecodeStatus decode_padded(std::span<const BatchToken> batch) { return decode(batch); }
  virtual std::span<const float> logits(std::int32_t row) const = 0;
  // With ModelInfo::embeddings: under mean, cls and rank pooling what the last decode pooled for
  // `seq` from its rows in that call (every row is read, so the whole prompt must be in the call);
  // under none the output of batch row `row`, and under last the same (the row of the prompt's last
  // token, which last pooling takes as it is). ModelInfo::embedding_width floats; empty when the
  // call computed none for it.
  virtual std::span<const float> embedding(SeqId /*seq*/, std::int32_t /*row*/) const { return {}; }
  // The vision projector, or nullptr for a text-only engine.
  virtual Vision* vision() const { return nullptr; }
  // Runs the model over embedding rows instead of tokens (an image's, from Vision::encode):
  // `embeddings` holds `rows` rows of model().n_embd floats for positions [pos, pos + rows) of
  // `seq`, at most batch_size() rows, which are rows [pos - begin, ..) of `media`, the image or
  // clip whose first token is at `begin`; no logits are produced. Rows of a non_causal image attend
  // to each other both ways. With M-RoPE an image's rows go to its grid's positions (engine.h's
  // positions stay token indices: the engine maps them, rope_layout.h). On failure the KV cache
  // holds nothing of it.
  virtual DecodeStatus decode_embeddings(std::span<const float> /*embeddings*/, std::int32_t /*rows*/, Pos /*pos*/,
                                         SeqId /*seq*/, const PreparedImage& /*media*/, Pos /*begin*/) {
    return DecodeStatus::error;
  }
  // Throws std::invalid_argument for a grammar check_grammar refuses. Safe from any thread, also
  // while the engine decodes: building a large grammar's sampler takes time no step should wait for.
  virtual std::unique_ptr<Sampler> make_sampler(const SamplingParams& params) = 0;
  // Whether make_sampler can constrain output by `grammar`: nullopt when it can, else why not
  // (the parser's message). Safe from any thread; call it at request time.
  virtual std::optional<std::string> check_grammar(const Grammar& grammar) const = 0;

  // Sequence operations on the KV cache. Ranges are [p0, p1); p1 < 0 means "to the end".
  // Positions here are token indices in the prompt. With M-RoPE an image's cells share one
  // position in libllama, so a range holds an image whole or not at all: the image goes with the
  // range that holds its last token (callers never cut inside an image: UnbrokenSpan).
  // copy_sequence: dst then holds src's tokens in [p0, p1) too. In the unified pool
  // (ModelInfo::cells_shared) the cells are shared (metadata only). With a stream per sequence
  // they are copied, and dst's stream is rebuilt from src's: REQUIRES dst empty, or holding an
  // unbroken run that ends at or after p0 - 1, below p1, whose tokens src holds too (so src's
  // cells replace it); and src holding every position from p0 (or dst's first) to p1 - 1.
  // Throws std::logic_error when these do not hold.
  virtual void copy_sequence(SeqId src, SeqId dst, Pos p0 = 0, Pos p1 = -1) = 0;
  // Returns false when the memory cannot drop a partial range (recurrent state).
  virtual bool remove_sequence(SeqId seq, Pos p0 = 0, Pos p1 = -1) = 0;
  virtual PosRange sequence_positions(SeqId seq) const = 0;
  // Whether K/V cells can be moved to other positions (RoPE attention memory: libllama re-rotates
  // their keys at the next decode). Not for recurrent state, M-RoPE or a window cache that drops
  // cells (a sliding-window model shifts with its full window cache, --swa-full).
  virtual bool can_shift() const { return false; }
  // Adds `delta` to the positions of `seq`'s cells in [p0, p1). Every sequence that shares one of
  // those cells sees it move: shift only cells `seq` alone owns. False (nothing moved) when the
  // memory cannot shift. The moved keys are rotated, not recomputed: what attends to them is close
  // to, not equal to, what a cold run computes.
  virtual bool shift_sequence(SeqId /*seq*/, Pos /*p0*/, Pos /*p1*/, Pos /*delta*/) { return false; }
  virtual void clear() = 0;

  // Serialized state of one sequence (its K/V cells or recurrent state), restorable into any
  // sequence id of a context of the same model. restore_sequence returns false and leaves `dst`
  // empty when the bytes do not fit this context or are malformed.
  virtual Bytes save_sequence(SeqId seq) const = 0;
  virtual bool restore_sequence(std::span<const std::uint8_t> state, SeqId dst) = 0;

  // A checkpoint: the part of a sequence's state that cannot be cut back to an earlier position —
  // the recurrent state, and the window cells of a sliding-window cache that drops old cells —
  // without the full-attention K/V. Empty for a model whose memory is trimmable.
  virtual Bytes save_checkpoint(SeqId seq) const = 0;
  // Replaces that part of `dst`'s state with a checkpoint; `dst`'s full-attention cells stay. The
  // restored sequence continues from the checkpoint's position once it also holds the attention
  // cells before it. Returns false (the partial state of `dst` then empty) when the bytes do not
  // fit this context.
  virtual bool restore_checkpoint(std::span<const std::uint8_t> state, SeqId dst) = 0;
  // Empties the part of `seq`'s state a checkpoint holds and keeps its full-attention cells, which
  // can then be cut back and saved like a dense model's (a recurrent state refuses to lose only
  // part of what it consumed). No-op for a trimmable memory.
  virtual void drop_checkpoint_state(SeqId seq) = 0;
};

// Loads a GGUF file and creates a context. Throws std::runtime_error with the reason on failure.
// Fingerprints the file through options.fingerprint_cache (model_fingerprint.h) and logs it.
std::unique_ptr<Engine> load_llama_engine(const std::string& model_path, const ContextOptions& options,
                                          const std::string& model_id = {});

// Reads model metadata and fingerprints the file without creating a context (runtime_signature
// stays empty). `fingerprint_cache`: as ContextOptions::fingerprint_cache.
ModelInfo inspect_model(const std::string& model_path, const std::string& fingerprint_cache = {});

}  // namespace prefixd::engine
