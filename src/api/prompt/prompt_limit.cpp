#include "api/prompt/prompt_limit.h"

namespace prefixd::api {

TextWeight weigh(std::string_view text) {
  TextWeight weight{.bytes = text.size()};
  for (const char c : text) {
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    weight.non_space_bytes += space ? 0 : 1;
  }
  return weight;
}

std::size_t PromptLimit::tokens_for(std::size_t bytes) const {
  if (!span_ || span_->max_bytes == 0) return 0;
  return (bytes + span_->max_bytes - 1) / span_->max_bytes;
}

std::size_t PromptLimit::prompt_tokens(const TextWeight& text) const {
  if (!span_) return 0;
  return tokens_for(span_->strips_whitespace ? text.non_space_bytes : text.bytes);
}

std::size_t PromptLimit::rendered_content_tokens(const TextWeight& text) const { return tokens_for(text.non_space_bytes); }

}  // namespace prefixd::api
