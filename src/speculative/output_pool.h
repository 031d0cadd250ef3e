// prefixd speculative — the outputs a namespace produced earlier, for n-gram drafting: a request
// that is retried, regenerated or resumed after its client left drafts its own earlier answer.
//
// Each entry is one finished reply with the prompt tokens just before it (its lead), so that a
// lookup at the start of a reply finds the reply that followed the same prompt. Entries are kept
// apart by group (the request's cache namespace: model, runtime, tenant and cache_salt), so a
// request only ever drafts from replies its own namespace produced, exactly as it only reuses
// K/V from there; each also names its owner (the tenant's scope) so that a tenant's reset drops
// them. The pool is bounded in tokens: the oldest entries go first. An index of every run of
// kIndexedTokens tokens (with its group) finds the places a context's ending recurs without
// reading the entries that do not hold it: a lookup costs what the matching places cost, not
// the pool's size. Used on one thread.
// Must not know: the scheduler, the cache, the model runtime (only token ids).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/types.h"
#include "speculative/suffix_match.h"

namespace prefixd::speculative {

class OutputPool {
 public:
  // How many prompt tokens before a reply an entry keeps: enough to tell apart the replies that
  // followed different prompts sharing a template's ending.
  static constexpr std::size_t kLeadTokens = 64;
  // find() reports matches of at least this many tokens (the length of the indexed runs).
  static constexpr std::int32_t kIndexedTokens = 3;

  explicit OutputPool(std::size_t max_tokens) : max_tokens_(max_tokens) {}

  // Keeps `output` after the last kLeadTokens tokens of `prompt`. A reply equal to one the group
  // already holds refreshes that entry instead of adding another. Replies of fewer than two
  // tokens are not kept (nothing to draft from them).
  void remember(std::string_view group, std::string_view owner, std::span<const engine::Token> prompt,
                std::span<const engine::Token> output);

  // The entry of `group` whose tokens best continue `context`: the longest match of the context's
  // end (up to max_length tokens, at least kIndexedTokens) followed by a token, the newest entry
  // and then the latest place winning ties; its continuation stays valid until the next remember
  // or forget.
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
  // A place in an entry: the index of the last token of an indexed run.
  struct Place {
    std::uint64_t entry = 0;
    std::uint32_t end = 0;
  };
  static std::uint64_t run_key(std::string_view group, std::span<const engine::Token> run);
  void add(std::uint64_t id, Entry entry);
  void erase(std::map<std::uint64_t, Entry>::iterator it);
  void evict_to(std::size_t limit);

  std::size_t max_tokens_ = 0;
  std::size_t tokens_ = 0;
  std::uint64_t next_id_ = 0;
  std::map<std::uint64_t, Entry> entries_;  // by id: oldest first
  // Every place of every run of kIndexedTokens tokens followed by another, by the run and its
  // group (a key may hold other runs' places: each is compared before it counts), oldest first.
  std::unordered_map<std::uint64_t, std::vector<Place>> index_;
};

}  // namespace prefixd::speculative
