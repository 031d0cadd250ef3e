// prefixd api — how far the prompt cache shares K/V between the requests of one tenant.
//
// `tenant` (the default): every request of a tenant may reuse any prefix another request of the
// tenant left; sessions (prompt_cache_key, else user) are only a preference. `session`: a request
// reuses only what its own session left, except the shareable prefix — today the tenant's
// configured system prompt (--cache-shared-prefix-file), which every session of the tenant shares.
// A request without a session reuses nothing across requests but that prefix.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/prompt/chat_template.h"
#include "engine/engine.h"

namespace prefixd::api {

enum class CacheIsolation { tenant, session };
std::optional<CacheIsolation> parse_cache_isolation(std::string_view name);
const char* cache_isolation_name(CacheIsolation isolation);

// The tokens of a configured text rendered as the system message of a conversation, alone, the way
// the chat template renders the start of every conversation that opens with it.
class SharedPrefix {
 public:
  SharedPrefix() = default;
  // Renders `text` as a system message (no generation prompt) and tokenizes it like a prompt. The
  // error is the template's refusal, or an empty rendering.
  static std::expected<SharedPrefix, std::string> render(const ChatTemplate& chat_template,
                                                         const engine::Vocabulary& vocab, std::string_view text);

  // The number of leading tokens of `prompt` that are this prefix: all of it when `prompt` starts
  // with it token for token, else 0. (Token-exact: a template that renders the system message
  // differently inside a longer conversation, or a prompt that edits it, shares nothing.)
  std::int32_t length_in(std::span<const engine::Token> prompt) const;
  std::size_t size() const { return tokens_.size(); }

 private:
  std::vector<engine::Token> tokens_;
};

}  // namespace prefixd::api
