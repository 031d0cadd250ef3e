// prefixd speculative — the outputs a namespace produced earlier, for n-gram drafting: a request
// that is retried, regenerated or resumed after its client left drafts its own earlier answer.
//
// Each entry is one finished reply with the prompt tokens just before it (its lead), so that a
// lookup at the start of a reply finds the reply that followed the same prompt. Entries are kept
// apart by group (the request's cache namespace: model, runtime, tenant and cache_salt), so a
// request only ever drafts from replies its own namespace produced, exactly as it only reuses
// K/V from there; each also names its owner (the tenant's scope) so that a tenant's reset drops
// them. The pool is bounded in tokens: the oldest entries go first. Used on one thread.
// Must not know: the scheduler, the cache, the model runtime (only token ids).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/types.h"
#include "speculative/suffix_match.h"

namespace prefixd::speculative {

class OutputPool {
 public:
  // How many prompt tokens before a reply an entry keeps: enough to tell apart the replies that
  // followed different prompts sharing a template's ending.
  static constexpr std::size_t kLeadTokens = 64;

  explicit OutputPool(std::size_t max_tokens) : max_tokens_(max_tokens) {}

  // Keeps `output` after the last kLeadTokens tokens of `prompt`. A reply equal to one the group
  // already holds refreshes that entry instead of adding another. Replies of fewer than two
  // tokens are not kept (nothing to draft from them).
  void remember(std::string_view group, std::string_view owner, std::span<const engine::Token> prompt,
                std::span<const engine::Token> output);

  // The entry of `group` whose tokens best continue `context` (longest_suffix_match over each,
  // the newest winning ties); its continuation stays valid until the next remember or forget.
  struct Found {
    SuffixMatch match;
    std::span<const engine::Token> continuation;
  };
  Found find(std::string_view group, std::span<const engine::Token> context, std::int32_t max_length) const;

  void forget_owner(std::string_view owner);
  void clear();

  std::size_t tokens() const { return tokens_; }
  std::size_t entries() const { return entries_.size(); }
  std::size_t max_tokens() const { return max_tokens_; }

 private:
  struct Entry {
    std::string group;
    std::string owner;
    std::vector<engine::Token> tokens;  // lead, then the reply
  };
  void evict_to(std::size_t limit);

  std::size_t max_tokens_ = 0;
  std::size_t tokens_ = 0;
  std::deque<Entry> entries_;  // oldest first
};

}  // namespace prefixd::speculative
