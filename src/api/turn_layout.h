// prefixd api — where a rendered conversation's turns begin, and what the chat template renders
// after a reply: the positions a prompt cache should be able to resume from.
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "api/chat_template.h"
#include "engine/engine.h"

namespace prefixd::api {

struct TurnLayout {
  // Token positions in the prompt where a user turn begins (the end of the history before it),
  // ascending; the first is the end of the system prompt when there is one.
  std::vector<engine::Pos> boundaries;
  // The tokens the template renders right after the assistant's reply when the reply is part of
  // the next request; empty when the template renders the conversation differently once the
  // reply is in it (then nothing can be prepared).
  std::vector<engine::Token> continuation;
};

// Tokenizes text `input` rendered to, exactly as the request's prompt was tokenized.
using RenderedTokenizer = std::function<std::vector<engine::Token>(std::string_view rendered, bool add_special)>;

// `prompt_text` / `prompt` are `input` rendered and tokenized (by `tokenize`) as the request's
// prompt. Positions are kept only where the history's own tokenization is a prefix of the
// prompt's, so a boundary is always a position another request that shares the history reaches
// token for token. At most `max_boundaries` (the first user turn and the latest ones) are
// computed: each costs a render and a tokenization of the history before it; 0: none.
TurnLayout turn_layout(const ChatTemplate& chat_template, const RenderedTokenizer& tokenize, const ChatInput& input,
                       std::string_view prompt_text, std::span<const engine::Token> prompt,
                       std::size_t max_boundaries = 8);

}  // namespace prefixd::api
