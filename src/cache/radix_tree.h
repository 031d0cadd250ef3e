// prefixd cache — a radix tree over token sequences, one per namespace.
//
// Every stored entry is a token sequence owned by a session; the tree shares common prefixes so
// a longest-prefix match costs O(prompt length). Each node counts the entries in its subtree per
// session, which gives the two-tier lookup: the best in-session match, and a cross-session match
// only when it is strictly longer.
// Invariants: every node except the root lies on the path of at least one entry; a node's
// counts equal the number of entries ending in its subtree.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/types.h"

namespace prefixd::cache {

using EntryId = std::uint64_t;

class RadixTree {
 public:
  struct Match {
    std::int32_t length = 0;   // tokens of the query shared with `entry`
    EntryId entry = 0;         // valid when length > 0
    bool in_session = false;
  };

  RadixTree();
  ~RadixTree();
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  // Longest shared prefix with any stored entry, preferring `session` unless another session's
  // match is strictly longer. `accept` filters entries (e.g. "fully contained in the query").
  Match match(std::span<const engine::Token> query, const std::string& session) const;
  // Longest match restricted to entries whose whole sequence is a prefix of `query`.
  Match match_whole(std::span<const engine::Token> query, const std::string& session) const;

  void insert(EntryId id, std::span<const engine::Token> tokens, const std::string& session);
  void erase(EntryId id);
  bool contains(EntryId id) const { return entries_.contains(id); }
  std::size_t size() const { return entries_.size(); }
  // Tokens stored once each: the sum of every node's span (what shared cells hold).
  std::int64_t unique_tokens() const { return unique_tokens_; }

 private:
  struct Node;
  struct EntryRecord {
    Node* node;
    std::string session;
    std::int32_t length;
  };

  EntryId pick_entry(const Node* node, const std::string* session) const;

  std::unique_ptr<Node> root_;
  std::unordered_map<EntryId, EntryRecord> entries_;
  std::int64_t unique_tokens_ = 0;
};

}  // namespace prefixd::cache
