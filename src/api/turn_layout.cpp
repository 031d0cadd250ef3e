#include "api/turn_layout.h"

#include <algorithm>
#include <string>

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

}  // namespace

TurnLayout turn_layout(const ChatTemplate& chat_template, const RenderedTokenizer& tokenize, const ChatInput& input,
                       std::string_view prompt_text, std::span<const engine::Token> prompt, std::size_t max_boundaries) {
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
  for (std::size_t i : chosen) {
    ChatInput history = input;
    history.add_generation_prompt = false;
    history.messages = nlohmann::json::array();
    for (std::size_t j = 0; j < i; ++j) history.messages.push_back(input.messages[j]);
    const auto text = chat_template.render(history);
    if (!text || text->empty() || !prompt_text.starts_with(*text)) continue;
    const std::vector<engine::Token> tokens = tokenize(*text, /*add_special=*/true);
    if (tokens.empty() || tokens.size() >= prompt.size() || !std::ranges::equal(tokens, prompt.first(tokens.size()))) {
      continue;
    }
    layout.boundaries.push_back(static_cast<engine::Pos>(tokens.size()));
  }
  std::ranges::sort(layout.boundaries);
  return layout;
}

}  // namespace prefixd::api
