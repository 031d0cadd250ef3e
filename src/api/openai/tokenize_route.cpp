#include "api/openai/tokenize_route.h"

#include <format>
#include <utility>

namespace prefixd::api {

std::expected<nlohmann::json, ApiError> tokenize_answer(std::string_view body, const PromptBuilder& prompts,
                                                        const ParseOptions& parse_options,
                                                        std::int32_t max_prompt_tokens) {
  if (auto refused = prompts.refuse_oversized_chat(body, max_prompt_tokens)) return std::unexpected(std::move(*refused));
  auto root = parse_json_object(body, parse_options.max_json_nodes);
  if (!root) return std::unexpected(root.error());
  if (root->contains("messages")) {
    root = nlohmann::ordered_json();  // the chat parser reads the body itself
    auto chat = parse_chat_request(body, parse_options);
    if (!chat) return std::unexpected(chat.error());
    auto tokens = prompts.chat_tokens(*chat, max_prompt_tokens);
    if (!tokens) return std::unexpected(tokens.error());
    return nlohmann::json{{"tokens", std::move(*tokens)}};
  }
  const auto content = root->find("content");
  if (content == root->end() || !content->is_string()) {
    return std::unexpected(invalid_param("content", "'content' must be a string (or send 'messages' to tokenize a chat)"));
  }
  auto flag = [&](const char* name, bool fallback) -> std::expected<bool, ApiError> {
    const auto it = root->find(name);
    if (it == root->end() || it->is_null()) return fallback;
    if (!it->is_boolean()) return std::unexpected(invalid_param(name, std::format("'{}' must be a boolean", name)));
    return it->get<bool>();
  };
  // Defaults as llama.cpp's /tokenize: no BOS, special tokens parsed.
  const auto add_special = flag("add_special", false);
  const auto parse_special = flag("parse_special", true);
  if (!add_special) return std::unexpected(add_special.error());
  if (!parse_special) return std::unexpected(parse_special.error());
  auto tokens = prompts.tokenize(content->get_ref<const std::string&>(), *add_special, *parse_special, max_prompt_tokens);
  if (!tokens) return std::unexpected(tokens.error());
  return nlohmann::json{{"tokens", std::move(*tokens)}};
}

std::expected<nlohmann::json, ApiError> detokenize_answer(std::string_view body, const engine::Vocabulary& vocab,
                                                          std::size_t max_json_nodes) {
  auto root = parse_json_object(body, max_json_nodes);
  if (!root) return std::unexpected(root.error());
  const auto tokens = root->find("tokens");
  if (tokens == root->end() || !tokens->is_array()) {
    return std::unexpected(invalid_param("tokens", "'tokens' must be an array of token ids"));
  }
  std::string content;
  for (std::size_t i = 0; i < tokens->size(); ++i) {
    const auto& id = (*tokens)[i];
    const std::string param = std::format("tokens[{}]", i);
    if (!id.is_number_integer()) return std::unexpected(invalid_param(param, std::format("'{}' must be an integer token id", param)));
    const auto value = id.get<std::int64_t>();
    if (value < 0 || value >= vocab.size()) {
      return std::unexpected(invalid_param(
          param, std::format("'{}' is {}, not a token id of this model (0 to {})", param, value, vocab.size() - 1)));
    }
    content += vocab.piece(static_cast<engine::Token>(value), /*render_special=*/true);
  }
  return nlohmann::json{{"content", std::move(content)}};
}

std::expected<nlohmann::json, ApiError> apply_template_answer(std::string_view body, const PromptBuilder& prompts,
                                                              const ParseOptions& parse_options,
                                                              std::int32_t max_prompt_tokens) {
  if (auto refused = prompts.refuse_oversized_chat(body, max_prompt_tokens)) return std::unexpected(std::move(*refused));
  auto parsed = parse_chat_request(body, parse_options);
  if (!parsed) return std::unexpected(parsed.error());
  auto prompt = prompts.render(*parsed);
  if (!prompt) return std::unexpected(prompt.error());
  return nlohmann::json{{"prompt", std::move(*prompt)}};
}

}  // namespace prefixd::api
