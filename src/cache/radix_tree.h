// prefixd cache — a radix tree over token sequences, one per namespace.
//
// Every entry is a token sequence owned by a session; the tree shares common prefixes so a
// longest-prefix match costs O(prompt length). A node covers a span of tokens and knows how many
// entries pass through it (per session, for the two-tier lookup: the best in-session match, and a
// cross-session match only when it is strictly longer) and how many locks cover it.
//
// The tree is also the device tier's cell ledger. The cache keeps every entry's K/V in the model's
// context such that entries sharing a prefix share its cells, so each node stands for exactly
// `span` cells: cells held = unique_tokens(). A lock is a running request's hold on a prefix it
// adopted (it uses those cells too); locked nodes are never given up, so cells that dropping an
// entry would free are its own unlocked nodes (freeable()).
// Invariants: every node except the root lies on the path of at least one entry; a node's counts
// equal the entries ending in its subtree; a node's lock count equals the locks whose prefix
// covers it, and a locked node lies on some entry's path.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/types.h"

namespace prefixd::cache {

using EntryId = std::uint64_t;

// What a lookup may reuse (session isolation): entries of its own session whole, and of any other
// session only their first `others` tokens. The default is no wall: a session is a preference.
struct Reach {
  std::int32_t others = std::numeric_limits<std::int32_t>::max();
  bool own = true;  // false: the request has no session of its own; every entry is another's
};

class RadixTree {
 public:
  struct Match {
    std::int32_t length = 0;   // tokens of the query shared with `entry`
    EntryId entry = 0;         // valid when length > 0
    bool in_session = false;
  };

  // `checked`: preconditions are checked on every call (the checked configuration, see
  // CacheConfig::verify_every_operation); a violated one throws std::logic_error.
  explicit RadixTree(bool checked = false);
  ~RadixTree();
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  // Longest shared prefix with any stored entry within `reach`, preferring `session` unless
  // another session's match is strictly longer. A match with another session's entry never
  // exceeds reach.others tokens.
  Match match(std::span<const engine::Token> query, const std::string& session, const Reach& reach = {}) const;
  // Longest match restricted to entries whose whole sequence is a prefix of `query` (another
  // session's entry only when it is no longer than reach.others).
  Match match_whole(std::span<const engine::Token> query, const std::string& session, const Reach& reach = {}) const;

  // REQUIRES: `id` is not in the tree.
  void insert(EntryId id, std::span<const engine::Token> tokens, const std::string& session);
  // REQUIRES: no locked node is left without an entry (see keep_length()).
  void erase(EntryId id);
  // Shortens entry `id` to its first `length` tokens. REQUIRES: 0 < length <= its length, and
  // length >= keep_length(id).
  void truncate(EntryId id, std::int32_t length);
  bool contains(EntryId id) const { return entries_.contains(id); }
  std::int32_t length(EntryId id) const;
  std::size_t size() const { return entries_.size(); }

  // Locks the path of the first `length` tokens of `tokens`. REQUIRES: the tree holds that path
  // (length <= match(tokens).length). Every lock is undone by unlock() with the same arguments.
  void lock(std::span<const engine::Token> tokens, std::int32_t length);
  void unlock(std::span<const engine::Token> tokens, std::int32_t length);

  // The length entry `id` can be cut back to without losing cells anyone else uses: the end of
  // its deepest node that another entry passes through or a lock covers (0 if none).
  std::int32_t keep_length(EntryId id) const;
  // The end of the deepest locked node on entry `id`'s path (0 if none).
  std::int32_t locked_length(EntryId id) const;
  // True when another entry passes through the first `length` tokens of entry `id`.
  bool shared_with_another(EntryId id, std::int32_t length) const;

  // Tokens stored once each: the sum of every node's span (the cells the entries hold).
  std::int64_t unique_tokens() const { return unique_tokens_; }
  // Tokens of locked nodes (cells running requests use as well).
  std::int64_t locked_tokens() const { return locked_tokens_; }

 private:
  struct Node;
  struct EntryRecord {
    Node* node;
    std::string session;
  };

  void expect(bool holds, const char* condition) const;
  EntryId pick_entry(const Node* node, const std::string* session) const;
  // The node ending exactly at `length` along `tokens`, splitting an edge if needed.
  Node* node_at(std::span<const engine::Token> tokens, std::int32_t length);
  Node* split(Node* child, std::size_t k);
  void prune(Node* node);

  std::unique_ptr<Node> root_;
  std::unordered_map<EntryId, EntryRecord> entries_;
  std::int64_t unique_tokens_ = 0;
  std::int64_t locked_tokens_ = 0;
  bool checked_ = false;
};

}  // namespace prefixd::cache
