// prefixd api — refuses a prompt that cannot fit from its length alone, before the work.
//
// Tokenizing costs time and memory in proportion to the text (seconds and hundreds of megabytes
// for a few megabytes of text), and the count is known only at the end. But a token stands for at
// most engine::TokenSpan::max_bytes bytes, so a text of B bytes becomes at least
// ceil(B / max_bytes) tokens: when that already exceeds the limit, the prompt is refused unread.
// The bound never refuses a prompt that fits; prompts it lets through are tokenized and measured
// exactly as before.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "api/body/body_scan.h"
#include "engine/engine.h"

namespace prefixd::api {

// The decoded weight of a text (its bytes, and those that are not ASCII whitespace).
TextWeight weigh(std::string_view text);

class PromptLimit {
 public:
  // nullopt: the tokenizer gives no bound, and every min_tokens is 0.
  explicit PromptLimit(std::optional<engine::TokenSpan> span) : span_(span) {}

  // The fewest tokens a prompt text of this weight becomes, tokenized with special tokens parsed.
  // Whitespace counts unless a special token of the vocabulary swallows the whitespace beside it.
  std::size_t prompt_tokens(const TextWeight& text) const;

  // The fewest tokens client text contributes once a chat template has rendered it: templates
  // may trim it, so only the bytes that are not whitespace count.
  std::size_t rendered_content_tokens(const TextWeight& text) const;

  bool bounded() const { return span_.has_value(); }

 private:
  std::size_t tokens_for(std::size_t bytes) const;
  std::optional<engine::TokenSpan> span_;
};

}  // namespace prefixd::api
