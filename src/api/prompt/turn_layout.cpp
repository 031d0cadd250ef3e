#include "api/prompt/turn_layout.h"

#include <algorithm>
#include <string>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

namespace prefixd::api {
namespace {

// Stands for the reply's text while finding what follows it; templates copy content verbatim.
constexpr std::string_view kReplyMarker = "PREFIXDREPLYMARKER";

std::vector<engine::Token> continuation_after_reply(const ChatTemplate& chat_template, const RenderedTokenizer& tokenize,
                                                    const ChatInput& input, std::string_view prompt_text) {
  if (!input.add_generation_prompt) return {};
  ChatInput with_reply = input;
  with_reply.add_generation_prompt = false;
  with_reply.messages.push_back({{"role", "assistant"}, {"content", std::string(kReplyMarker)}});
  const auto rendered = chat_template.render(with_reply);
  if (!rendered || !rendered->starts_with(prompt_text)) return {};
  const std::string_view rest = std::string_view(*rendered).substr(prompt_text.size());
  if (!rest.starts_with(kReplyMarker)) return {};  // the template adds or rewrites text before the reply
  const std::string_view after = rest.substr(kReplyMarker.size());
  if (after.empty()) return {};
  return tokenize(after, /*add_special=*/false);
}

std::uint64_t digest_of(std::span<const engine::Token> tokens) { return XXH3_64bits(tokens.data(), tokens.size_bytes()); }

// XXH3-64 over length-prefixed parts, read at any point without ending it.
class PartsDigest {
 public:
  PartsDigest() { XXH3_64bits_reset(&state_); }
  void add(std::string_view part) {
    const std::uint64_t length = part.size();
    XXH3_64bits_update(&state_, &length, sizeof length);
    XXH3_64bits_update(&state_, part.data(), part.size());
  }
  std::uint64_t value() const { return XXH3_64bits_digest(&state_); }

 private:
  XXH3_state_t state_;
};

}  // namespace

std::optional<HistoryMemo::Known> HistoryMemo::find(std::uint64_t key) {
  std::lock_guard lock(mutex_);
  const auto it = known_.find(key);
  if (it == known_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second.second);
  return it->second.first;
}

void HistoryMemo::remember(std::uint64_t key, Known known) {
  std::lock_guard lock(mutex_);
  if (const auto it = known_.find(key); it != known_.end()) {
    it->second.first = known;
    order_.splice(order_.begin(), order_, it->second.second);
    return;
  }
  if (capacity_ == 0) return;
  if (known_.size() >= capacity_) {
    known_.erase(order_.back());
    order_.pop_back();
  }
  order_.push_front(key);
  known_.emplace(key, std::pair{known, order_.begin()});
}

TurnLayout turn_layout(const ChatTemplate& chat_template, const RenderedTokenizer& tokenize, const ChatInput& input,
                       std::string_view prompt_text, std::span<const engine::Token> prompt, std::size_t max_boundaries,
                       HistoryMemo* memo) {
  TurnLayout layout;
  layout.continuation = continuation_after_reply(chat_template, tokenize, input, prompt_text);
  if (!input.messages.is_array() || max_boundaries == 0) return layout;
  std::vector<std::size_t> user_turns;
  for (std::size_t i = 1; i < input.messages.size(); ++i) {
    const auto& message = input.messages[i];
    if (message.is_object() && message.value("role", "") == "user") user_turns.push_back(i);
  }
  // The first user turn (the end of the system prompt, shared across sessions) and the latest ones
  // (where a conversation's next request diverges when a recent turn is edited).
  std::vector<std::size_t> chosen;
  for (std::size_t k = 0; k < user_turns.size(); ++k) {
    if (k == 0 || k + max_boundaries > user_turns.size()) chosen.push_back(user_turns[k]);
  }
  // What a history is rendered from: the tools, the kwargs, then its messages one by one.
  PartsDigest rendered_from;
  rendered_from.add(input.tools.is_null() ? "" : input.tools.dump());
  rendered_from.add(input.extra_context.is_null() ? "" : input.extra_context.dump());
  std::size_t digested = 0;
  for (std::size_t i : chosen) {
    for (; digested < i; ++digested) rendered_from.add(input.messages[digested].dump());
    const std::uint64_t key = rendered_from.value();
    if (memo != nullptr) {
      if (const auto known = memo->find(key)) {
        if (known->tokens > 0 && known->tokens < prompt.size() && digest_of(prompt.first(known->tokens)) == known->tokens_digest) {
          layout.boundaries.push_back(static_cast<engine::Pos>(known->tokens));
        }
        continue;
      }
    }
    ChatInput history = input;
    history.add_generation_prompt = false;
    history.messages = nlohmann::ordered_json::array();
    for (std::size_t j = 0; j < i; ++j) history.messages.push_back(input.messages[j]);
    const auto text = chat_template.render(history);
    if (!text || text->empty() || !prompt_text.starts_with(*text)) continue;
    const std::vector<engine::Token> tokens = tokenize(*text, /*add_special=*/true);
    if (memo != nullptr) memo->remember(key, {tokens.size(), digest_of(tokens)});
    if (tokens.empty() || tokens.size() >= prompt.size() || !std::ranges::equal(tokens, prompt.first(tokens.size()))) {
      continue;
    }
    layout.boundaries.push_back(static_cast<engine::Pos>(tokens.size()));
  }
  std::ranges::sort(layout.boundaries);
  return layout;
}

}  // namespace prefixd::api
