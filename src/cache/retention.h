// prefixd cache — retained prefixes: a prefix a request asked the cache to keep for a while (a
// cache_control breakpoint with a TTL), ahead of least-recently-used eviction.
//
// A retention names a prefix of one namespace (its tokens), the scope that asked, a deadline, and
// the content addresses the prefix has in the tiers below the device: its host segments (the cuts
// a demotion of the donated sequence makes, up to the one holding the prefix's last token) and,
// for checkpoint families, the checkpoints a resume within it needs. Until its deadline:
//   - the device tier picks a retained entry (one whose tokens begin with a retained prefix) as an
//     eviction victim only when no other entry would do;
//   - the host and checkpoint stores skip retained keys when they evict for the LRU, the byte
//     budget or the TTL, unless every candidate is retained; a retained checkpoint outlives the
//     session chains that named it.
// So a retained prefix is never the first thing to go, and never the reason a running request
// finds no room: when only retained prefixes are left, they are evicted like any other.
// Budget: a scope retains at most `tokens_per_scope` tokens (the sum of its retained prefixes'
// lengths). A new retention that would pass it lifts that scope's retentions with the nearest
// deadlines first; one longer than the budget alone is refused. A retention of a prefix that
// extends (or equals) a retained prefix of the same namespace replaces it, keeping the later
// deadline, so a conversation that moves its breakpoint forward each turn holds one retention.
// REQUIRES: used from the engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/block_hash.h"
#include "cache/cache_types.h"
#include "cache/scope.h"
#include "engine/types.h"

namespace prefixd::cache {

using RetentionClock = std::chrono::steady_clock;

struct Retention {
  std::string ns;
  std::vector<engine::Token> tokens;  // the prefix [0, tokens.size())
  ScopeId scope{};
  RetentionClock::time_point until;
  std::vector<Digest> keys;  // host segments and checkpoints it needs
};

class Retentions {
 public:
  explicit Retentions(std::int64_t tokens_per_scope) : tokens_per_scope_(tokens_per_scope) {}

  enum class Added { retained, renewed, refused };
  Added add(Retention retention, RetentionClock::time_point now);
  // Forgets retentions whose deadline has passed; returns how many.
  std::int64_t expire(RetentionClock::time_point now);
  void clear();
  void clear_scope(const ScopeId& scope);
  // Lifts the retentions of `ns` that share more than `keep` tokens with `tokens` (what a
  // forget() of that path removes).
  void lift_path(const std::string& ns, std::span<const engine::Token> tokens, std::int32_t keep);

  // Whether a host segment or checkpoint key belongs to a live retention.
  bool holds(const Digest& key) const { return key_counts_.contains(key); }
  // Whether `tokens` of namespace `ns` begin with a retained prefix (a device entry holding them
  // holds that prefix).
  bool covers(const std::string& ns, std::span<const engine::Token> tokens) const;

  bool enabled() const { return tokens_per_scope_ > 0; }
  std::int64_t size() const { return static_cast<std::int64_t>(retentions_.size()); }
  std::int64_t tokens() const { return tokens_; }
  std::int64_t tokens_of(const ScopeId& scope) const;
  std::int64_t tokens_per_scope() const { return tokens_per_scope_; }
  struct Counters {
    std::int64_t added = 0;    // new retentions
    std::int64_t renewed = 0;  // retentions a request extended or prolonged
    std::int64_t refused = 0;  // longer than a scope's whole budget
    std::int64_t lifted = 0;   // ended before their deadline: for a newer one of the same scope, or by a clear
    std::int64_t expired = 0;  // reached their deadline
  };
  const Counters& counters() const { return counters_; }
  // Its part of a stats snapshot.
  RetentionStats stats() const {
    return RetentionStats{.prefixes = size(),
                          .tokens = tokens(),
                          .budget_tokens_per_scope = tokens_per_scope(),
                          .added = counters_.added,
                          .renewed = counters_.renewed,
                          .refused = counters_.refused,
                          .lifted = counters_.lifted,
                          .expired = counters_.expired};
  }

 private:
  using List = std::list<Retention>;
  void erase(List::iterator it);
  void index(const Retention& retention);

  std::int64_t tokens_per_scope_;
  List retentions_;
  std::unordered_map<Digest, std::int64_t, DigestHash> key_counts_;  // keys of live retentions
  std::int64_t tokens_ = 0;
  Counters counters_;
};

}  // namespace prefixd::cache
