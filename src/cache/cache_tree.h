// prefixd cache — a view of what the tiers hold as one radix tree per namespace, for people to
// browse (GET /v1/cache/tree, the web UI's cache page).
//
// The device tier's entries and the chains of host and disk segments are merged token by token:
// a node is a span of positions that every sequence through it shares, marked with each tier that
// holds those positions. Host and disk segments are shown only as part of a chain that reaches
// back to their namespace's root, since only such a chain can be restored. The view is a copy
// taken on the cache's thread; building it changes no LRU order, counter or tier.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/block_hash.h"
#include "cache/scope.h"
#include "engine/types.h"

namespace prefixd::cache {

// Which tiers hold a node's positions (bit set).
enum TreeTier : std::uint8_t { kTreeDevice = 1, kTreeHost = 2, kTreeDisk = 4 };

struct TreeNode {
  engine::Pos begin = 0;
  engine::Pos end = 0;
  std::vector<engine::Token> tokens;  // positions [begin, end)
  std::uint8_t tiers = 0;
  std::int64_t entries = 0;           // device entries whose sequence passes through this node
  std::vector<std::string> sessions;  // their sessions, sorted, "" left out
  engine::Pos locked_until = 0;       // running requests use the device cells of positions below this
  std::optional<double> idle_seconds; // since the most recent use of anything through it
  std::vector<std::unique_ptr<TreeNode>> children;  // by first token

  bool locked() const { return begin < locked_until; }  // some of its cells are in use
};

struct NamespaceTree {
  std::string ns;  // namespace digest, 32 raw bytes
  ScopeId scope{};
  std::int64_t tokens = 0;  // positions held once each (the sum of every node's span)
  std::int64_t nodes = 0;   // not counting the root
  std::unique_ptr<TreeNode> root;
};

struct CacheTree {
  std::vector<NamespaceTree> namespaces;  // largest first
  std::int64_t node_limit = 0;
  bool truncated = false;  // nodes past node_limit (the deepest first) were left out
};

struct TreeQuery {
  std::optional<ScopeId> scope;  // only this scope's namespaces; nullopt: every scope
  std::int64_t node_limit = 2000;
};

// One sequence or segment chain a tier holds, from position 0.
struct HeldSequence {
  std::string ns;
  ScopeId scope{};
  std::uint8_t tier = 0;
  std::span<const engine::Token> tokens;
  std::string session;
  engine::Pos locked = 0;  // device entries: its first `locked` positions are in use
  std::optional<double> idle_seconds;
  bool entry = false;      // a device entry (counted in TreeNode::entries)
};

// Builds the trees; add() copies what it keeps.
class CacheTreeBuilder {
 public:
  explicit CacheTreeBuilder(TreeQuery query);
  ~CacheTreeBuilder();
  CacheTreeBuilder(const CacheTreeBuilder&) = delete;
  CacheTreeBuilder& operator=(const CacheTreeBuilder&) = delete;

  // A sequence from position 0. Ignored when the query's scope excludes it.
  void add(const HeldSequence& held);
  CacheTree build();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Host or disk segments as full sequences: each segment whose parent chain reaches back to a
// namespace root (a parent that is no segment's key is taken to be the namespace digest when
// `begin` is 0) is reported once with the tokens from position 0 to its end.
struct ChainSegment {
  Digest key{};
  Digest parent{};
  engine::Pos begin = 0;
  std::span<const engine::Token> tokens;
  ScopeId scope{};
  std::optional<double> idle_seconds;
};
void add_segment_chains(CacheTreeBuilder& builder, std::span<const ChainSegment> segments, std::uint8_t tier);

}  // namespace prefixd::cache
