// prefixd api — where a rendered conversation's turns begin, and what the chat template renders
// after a reply: the positions a prompt cache should be able to resume from.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/prompt/chat_template.h"
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

// What turn_layout learned of the histories it rendered and tokenized: by a digest of what the
// history is rendered from (its messages, tools and kwargs), how many tokens it has and a digest of
// them. A conversation's next request sends the same histories again, so each of its boundaries but
// the newest costs a lookup and a hash of the prompt's first tokens instead of a render and a
// tokenization. A stale or foreign entry can only cost a checkpoint position, never a wrong token:
// a boundary is kept only where the remembered tokens are the prompt's own. Thread-safe; at most
// `capacity` histories, the least recently used forgotten first.
class HistoryMemo {
 public:
  struct Known {
    std::size_t tokens = 0;
    std::uint64_t tokens_digest = 0;
  };
  explicit HistoryMemo(std::size_t capacity = 8192) : capacity_(capacity) {}
  std::optional<Known> find(std::uint64_t key);
  void remember(std::uint64_t key, Known known);

 private:
  std::mutex mutex_;
  std::size_t capacity_;
  std::list<std::uint64_t> order_;  // most recently used first
  std::unordered_map<std::uint64_t, std::pair<Known, std::list<std::uint64_t>::iterator>> known_;
};

// `prompt_text` / `prompt` are `input` rendered and tokenized (by `tokenize`) as the request's
// prompt. Positions are kept only where the history's own tokenization is a prefix of the
// prompt's, so a boundary is always a position another request that shares the history reaches
// token for token. At most `max_boundaries` (the first user turn and the latest ones) are
// computed: each costs a render and a tokenization of the history before it, unless `memo` knows
// it; 0: none.
TurnLayout turn_layout(const ChatTemplate& chat_template, const RenderedTokenizer& tokenize, const ChatInput& input,
                       std::string_view prompt_text, std::span<const engine::Token> prompt,
                       std::size_t max_boundaries = 8, HistoryMemo* memo = nullptr);

}  // namespace prefixd::api
