// Byte-level BPE vocabulary (GPT-2 style, as llama.cpp's "gpt2" tokenizer model expects) and the
// ChatML chat template that goes with it; and BERT's WordPiece vocabulary (llama.cpp's "bert"
// tokenizer model) for encoder presets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modelgen/spec.h"

namespace prefixd::modelgen {

// llama.cpp's token types (llama_token_type); only the ones used here.
inline constexpr std::int32_t kTokenNormal = 1;
inline constexpr std::int32_t kTokenControl = 3;
inline constexpr std::int32_t kTokenUserDefined = 4;

// BERT's segment ("token type") embeddings, sentence A and sentence B: the rows of a bert preset's
// token_types.weight and the tokenizer.ggml.token_type_count its WordPiece vocabulary declares.
inline constexpr std::uint32_t kBertTokenTypeCount = 2;

struct Vocabulary {
  std::string model = "gpt2";             // tokenizer.ggml.model
  std::string pre = "qwen2";              // tokenizer.ggml.pre
  std::vector<std::string> tokens;        // token text: "Ġthe" for " the" (BPE), "▁the" (WordPiece)
  std::vector<std::int32_t> token_types;  // one per token
  std::vector<std::string> merges;        // "left right", rank = position; none for WordPiece
  std::int32_t bos_id = -1;               // BPE: <|endoftext|>, not added; WordPiece: [CLS]
  std::int32_t eos_id = -1;               // BPE: <|im_end|>, the end of an assistant turn; WordPiece: [SEP]
  std::int32_t pad_id = -1;               // BPE: <|endoftext|>; WordPiece: [PAD]
  bool add_bos = false;                   // tokenizer.ggml.add_bos_token
  bool add_eos = false;                   // tokenizer.ggml.add_eos_token
  // WordPiece only (-1 / 0 / false / unset: the key is not written).
  std::int32_t unk_id = -1;               // [UNK]
  std::int32_t sep_id = -1;               // [SEP]
  std::int32_t cls_id = -1;               // [CLS]
  std::int32_t mask_id = -1;              // [MASK]
  std::uint32_t token_type_count = 0;     // BERT's segment ("token type") embeddings; llama.cpp uses row 0
  // tokenizer.ggml.add_sep_token: whether a pair of texts (a reranker's query and document) gets a
  // second separator between them, RoBERTa's "<s> A </s></s> B </s>"; unset: libllama's default
  // for the tokenizer model (true for WordPiece).
  std::optional<bool> add_sep;
  bool lowercase = false;                 // tokenizer.ggml.normalizer.lowercase (an uncased vocabulary)
  std::string_view chat_template;         // tokenizer.chat_template; empty: none (BERT has none)
  // Fill-in-the-middle markers, as a coder model's vocabulary has them (what /infill builds on).
  struct FillInMiddle {
    std::int32_t prefix = -1;          // <|fim_prefix|>
    std::int32_t middle = -1;          // <|fim_middle|>
    std::int32_t suffix = -1;          // <|fim_suffix|>
    std::int32_t pad = -1;             // <|fim_pad|>
    std::int32_t repository = -1;      // <|repo_name|>: opens the repository-level context
    std::int32_t file_separator = -1;  // <|file_sep|>: opens each file of it
  } fim;
};

// Layout: 256 byte tokens (ids 0-255, id == byte value), then the merges learned on the embedded
// corpus, then filler words up to layout.n_regular, then the special tokens (ChatML, tool-call tags and fill-in-the-middle markers), then <|extra_N|>
// control tokens up to layout.size. Filler words are normal tokens the tokenizer never produces
// (no merge leads to them) but which decode to readable text, so a random model sampling them
// still prints words. The result does not depend on the weight seed: every seed of a preset
// tokenizes text identically.
Vocabulary build_vocabulary(const VocabLayout& layout);

// BERT-style uncased WordPiece (wordpiece.cpp), stored the way llama.cpp's converter stores it:
// [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4, control tokens), then pieces that start a word written
// with a leading U+2581 ("▁the", where BERT's vocab.txt has "the") and continuation pieces bare
// ("ing", where vocab.txt has "##ing"); [unusedN] control tokens fill any remaining ids up to
// layout.size. Pieces: every single character (so no lowercase ASCII word becomes [UNK]), the
// corpus's words, then the word-start and word-end pieces that save the most symbols on it.
// [CLS] and [SEP] are BOS and EOS and are added around every input (add_bos, add_eos), as the
// converter sets them for BERT.
Vocabulary build_wordpiece_vocabulary(const VocabLayout& layout);

// Splits text into words the way BERT's basic tokenizer (and llama.cpp's WPM tokenizer) does:
// lowercased, broken at whitespace, every punctuation or ASCII symbol character a word of its own.
std::vector<std::string> bert_words(std::string_view text);

// GPT-2's byte-to-unicode mapping: the UTF-8 text of the symbol standing for byte b.
std::string byte_symbol(unsigned char b);

// Splits text the way the qwen2 pre-tokenizer roughly does (words with their leading space,
// single digits, punctuation runs, whitespace), for BPE training.
std::vector<std::string> pre_tokenize(std::string_view text);

// Small English text the merges are learned from.
std::string_view training_corpus();

// ChatML Jinja template: system / user / assistant (with tool_calls) / tool messages, a `tools`
// list rendered into the system turn, and add_generation_prompt.
std::string_view chat_template();

// The rerank prompt a decoder reranker's GGUF carries as tokenizer.chat_template.rerank, with
// {query} and {document} placeholders that llama-server substitutes (no Jinja): a ChatML exchange
// asking whether the document answers the query, ending where the assistant's "yes" or "no" goes.
std::string_view rerank_template();

}  // namespace prefixd::modelgen
