// Byte-level BPE vocabulary (GPT-2 style, as llama.cpp's "gpt2" tokenizer model expects) and the
// ChatML chat template that goes with it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "modelgen/spec.h"

namespace prefixd::modelgen {

// llama.cpp's token types (llama_token_type); only the ones used here.
inline constexpr std::int32_t kTokenNormal = 1;
inline constexpr std::int32_t kTokenControl = 3;
inline constexpr std::int32_t kTokenUserDefined = 4;

struct Vocabulary {
  std::vector<std::string> tokens;        // token text in byte-level form ("Ġthe" for " the")
  std::vector<std::int32_t> token_types;  // one per token
  std::vector<std::string> merges;        // "left right", rank = position
  std::int32_t bos_id = -1;               // <|endoftext|> (not added: add_bos_token is false)
  std::int32_t eos_id = -1;               // <|im_end|>, the end of an assistant turn
  std::int32_t pad_id = -1;               // <|endoftext|>
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

}  // namespace prefixd::modelgen
