// prefixd scheduler — what the scheduler remembers of each session between its requests:
// - the last reply, to learn whether the session's client sends replies back verbatim (then the
//   next turn's prompt extends prompt + reply and a warm-up after the reply pays off) or writes its
//   own assistant turns (then a warm-up would feed tokens no request reuses);
// - the last request's prompt inputs (template, kwargs, tools, tool_choice), to name the ones a
//   request changed: they explain a prompt that diverges from the session's previous one before
//   its messages do. They never keep the cache from matching the tokens that stayed equal.
// - the latest sequence each session of each scope left to the cache (SessionPrompt), so that a
//   session's prefix can be saved as an artifact by its name (bounded: the kMaxKept most recently
//   updated).
// Bounded: at most kMaxSessions of each, the oldest dropped first. Owned by the scheduler thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/types.h"
#include "scheduler/request.h"

namespace prefixd::scheduler {

class SessionMemory {
 public:
  static constexpr std::size_t kMaxSessions = 4096;

  // A new request of `session` with `prompt`: notes whether it sends the session's previous reply
  // back verbatim (echoes()).
  void observe_prompt(const std::string& session, std::span<const engine::Token> prompt);
  // Whether the session's latest request sent its previous reply back.
  bool echoes(const std::string& session) const;
  // Keeps `tokens` past `prompt_length` as the session's reply to the prompt before it.
  void remember_reply(const std::string& session, std::span<const engine::Token> tokens, std::size_t prompt_length);
  // The names of `inputs` that differ from the session's previous request's (an input only one of
  // them has counts); remembers `inputs`. Empty for a session seen the first time.
  std::vector<std::string> changed_inputs(const std::string& session, const PromptInputs& inputs);
  // The most sessions either kind of memory holds now (at most kMaxSessions).
  std::size_t sessions() const { return std::max(replies_.size(), inputs_.size()); }

  static constexpr std::size_t kMaxKept = 1024;
  // `tokens` were donated to the cache under `key`: the latest sequence of key's session (nothing
  // for a request without a session).
  void remember_kept(const cache::RequestKey& key, std::span<const engine::Token> tokens);
  std::optional<SessionPrompt> latest_kept(const cache::ScopeId& scope, const std::string& session) const;
  // The cache forgot everything (nullopt) or one scope's entries: so do the kept sequences.
  void forget_kept(const std::optional<cache::ScopeId>& scope);

 private:
  struct Reply {
    std::size_t prompt_length = 0;
    std::uint64_t prompt_hash = 0;  // XXH3-64 of the prompt's token ids
    std::vector<engine::Token> reply;
    bool echoes = false;
  };
  std::unordered_map<std::string, Reply> replies_;
  std::unordered_map<std::string, PromptInputs> inputs_;
  struct Kept {
    SessionPrompt prompt;
    std::uint64_t order = 0;
  };
  std::unordered_map<std::string, Kept> kept_;  // by scope and session (kept_id)
  std::uint64_t kept_order_ = 0;
};

}  // namespace prefixd::scheduler
