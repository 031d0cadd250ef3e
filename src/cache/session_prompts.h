// prefixd cache — the latest prompt (and reply) each named session left in the cache, so that a
// session's prefix can be saved as an artifact by its name (PrefixCache::save_session_artifact).
// Bounded: the 1,024 most recently updated sessions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/request_key.h"

namespace prefixd::cache {

class SessionPrompts {
 public:
  struct Prompt {
    RequestKey key;
    std::vector<engine::Token> tokens;
  };

  // Notes `tokens` as the latest of `key`'s session (nothing for a request without a session).
  void remember(const RequestKey& key, std::span<const engine::Token> tokens) {
    if (key.session.empty()) return;
    RequestKey kept = key;
    kept.boundaries.clear();
    prompts_[session_id(key)] = Entry{{std::move(kept), {tokens.begin(), tokens.end()}}, ++order_};
    if (prompts_.size() > kRemembered) {
      prompts_.erase(std::ranges::min_element(prompts_, {}, [](const auto& kv) { return kv.second.order; }));
    }
  }

  std::optional<Prompt> latest(const ScopeId& scope, const std::string& session) const {
    if (session.empty()) return std::nullopt;
    auto it = prompts_.find(session_id(RequestKey{.session = session, .scope = scope}));
    if (it == prompts_.end()) return std::nullopt;
    return it->second.prompt;
  }

  void clear() { prompts_.clear(); }
  void clear_scope(const ScopeId& scope) {
    std::erase_if(prompts_, [&](const auto& item) { return item.second.prompt.key.scope == scope; });
  }

 private:
  static constexpr std::size_t kRemembered = 1024;
  struct Entry {
    Prompt prompt;
    std::uint64_t order = 0;
  };
  std::unordered_map<std::string, Entry> prompts_;  // by session_id()
  std::uint64_t order_ = 0;
};

}  // namespace prefixd::cache
