// Internal to src/engine/: the Vocabulary over libllama's tokenizer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <llama.h>

#include "engine/engine.h"

namespace prefixd::engine::detail {

class LlamaVocabulary final : public Vocabulary {
 public:
  // Reads the special tokens and the longest token once; `vocab` is owned by the model, which
  // must outlive this object.
  // `rerank_template`: the model's tokenizer.chat_template.rerank (empty when it has none).
  explicit LlamaVocabulary(const llama_vocab* vocab, std::string rerank_template = {});

  std::vector<Token> tokenize(std::string_view text, bool add_special, bool parse_special) const override;
  std::vector<Token> tokenize_with_literals(std::string_view text, bool add_special,
                                            std::span<const TextRange> literal) const override;
  const std::vector<std::string>& control_texts() const override { return control_texts_; }
  std::optional<TokenSpan> token_span() const override { return span_; }
  std::string piece(Token token, bool render_special) const override;
  bool is_end_of_generation(Token token) const override { return llama_vocab_is_eog(vocab_, token); }
  std::int32_t size() const override { return llama_vocab_n_tokens(vocab_); }
  std::optional<InfillTokens> infill_tokens() const override;
  std::vector<Token> rerank_tokens(std::string_view query, std::string_view document) const override;

 private:
  // A token that libllama's tokenizer splits out of the text before tokenizing the rest: control
  // and unknown tokens when special tokens are parsed, user-defined tokens always.
  struct Special {
    std::string text;
    Token token = 0;
    bool control = false;  // control or unknown: recognised only when special tokens are parsed
    bool lstrip = false;   // swallows the whitespace before it
    bool rstrip = false;   // swallows the whitespace after it
  };
  // A piece of the text: raw text to tokenize, or one special token.
  struct Fragment {
    std::size_t begin = 0;
    std::size_t end = 0;
    std::optional<Token> special;
  };

  // libllama's partition of `text` by special tokens (longest first, each over every raw fragment
  // left to right, with the strip attributes), except that control tokens overlapping a literal
  // range are left in the text.
  std::vector<Fragment> partition(std::string_view text, std::span<const TextRange> literal) const;

  const llama_vocab* vocab_;
  std::vector<Special> specials_;          // longest text first
  std::vector<std::string> control_texts_; // longest first; empty when literals are not supported
  std::optional<TokenSpan> span_;
  std::string rerank_template_;
};

}  // namespace prefixd::engine::detail
