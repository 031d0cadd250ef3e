#include "api/control/cache_isolation.h"

#include <algorithm>

namespace prefixd::api {

std::optional<CacheIsolation> parse_cache_isolation(std::string_view name) {
  if (name == "tenant") return CacheIsolation::tenant;
  if (name == "session") return CacheIsolation::session;
  return std::nullopt;
}

const char* cache_isolation_name(CacheIsolation isolation) {
  return isolation == CacheIsolation::tenant ? "tenant" : "session";
}

std::expected<SharedPrefix, std::string> SharedPrefix::render(const ChatTemplate& chat_template,
                                                             const engine::Vocabulary& vocab, std::string_view text) {
  ChatInput input;
  input.messages = nlohmann::ordered_json::array({{{"role", "system"}, {"content", std::string(text)}}});
  input.add_generation_prompt = false;
  auto rendered = chat_template.render(input);
  if (!rendered) return std::unexpected("the chat template cannot render it as a system message: " + rendered.error());
  SharedPrefix prefix;
  prefix.tokens_ = vocab.tokenize(*rendered, /*add_special=*/true, /*parse_special=*/true);
  if (prefix.tokens_.empty()) return std::unexpected("it renders to no tokens");
  return prefix;
}

std::int32_t SharedPrefix::length_in(std::span<const engine::Token> prompt) const {
  if (tokens_.empty() || prompt.size() < tokens_.size()) return 0;
  return std::ranges::equal(tokens_, prompt.first(tokens_.size())) ? static_cast<std::int32_t>(tokens_.size()) : 0;
}

}  // namespace prefixd::api
