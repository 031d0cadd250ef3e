// The cache tree view (cache/cache_tree.h): merging sequences token by token, segment chains, limits.
#include <gtest/gtest.h>

#include <vector>

#include "cache/cache_tree.h"

namespace prefixd::cache {
namespace {

using Tokens = std::vector<engine::Token>;

std::string ns_of(char c) { return std::string(32, c); }

HeldSequence device(const std::string& ns, const Tokens& tokens, const std::string& session, double idle,
                    engine::Pos locked = 0) {
  return HeldSequence{.ns = ns, .tier = kTreeDevice, .tokens = tokens, .session = session, .locked = locked,
                      .idle_seconds = idle, .entry = true};
}

TEST(CacheTreeBuilder, SharedPrefixesBecomeOneNodeAndBranchesSplitIt) {
  CacheTreeBuilder builder({});
  const Tokens a{1, 2, 3, 4, 5};
  const Tokens b{1, 2, 3, 9};
  const Tokens c{1, 2};
  builder.add(device(ns_of('n'), a, "s1", 5.0, 3));
  builder.add(device(ns_of('n'), b, "s2", 1.0));
  builder.add(device(ns_of('n'), c, "", 7.0));
  const CacheTree tree = builder.build();
  ASSERT_EQ(tree.namespaces.size(), 1u);
  const NamespaceTree& ns = tree.namespaces[0];
  EXPECT_EQ(ns.tokens, 6);  // 1 2 | 3 | 4 5, 9
  EXPECT_EQ(ns.nodes, 4);
  ASSERT_EQ(ns.root->children.size(), 1u);
  const TreeNode& top = *ns.root->children[0];
  EXPECT_EQ(top.tokens, (Tokens{1, 2}));
  EXPECT_EQ(top.entries, 3);
  EXPECT_EQ(top.sessions, (std::vector<std::string>{"s1", "s2"}));
  EXPECT_EQ(top.idle_seconds, 1.0);  // the most recent use through it
  EXPECT_TRUE(top.locked());
  ASSERT_EQ(top.children.size(), 1u);
  const TreeNode& mid = *top.children[0];
  EXPECT_EQ(mid.begin, 2);
  EXPECT_EQ(mid.end, 3);
  EXPECT_EQ(mid.entries, 2);
  ASSERT_EQ(mid.children.size(), 2u);
  EXPECT_EQ(mid.children[0]->tokens, (Tokens{9}));  // most recently used first
  EXPECT_FALSE(mid.children[0]->locked());
  EXPECT_EQ(mid.children[1]->tokens, (Tokens{4, 5}));
  EXPECT_FALSE(mid.children[1]->locked()) << "s1 locked only its first 3 positions";
  EXPECT_TRUE(mid.locked());
}

TEST(CacheTreeBuilder, SegmentChainsAreShownFromTheirRootAndAGapEndsThem) {
  CacheTreeBuilder builder({});
  Digest root{};
  root.fill(7);
  Digest k1{}, k2{}, k3{}, orphan_parent{}, k4{};
  k1[0] = 1;
  k2[0] = 2;
  k3[0] = 3;
  orphan_parent[0] = 9;
  k4[0] = 4;
  const Tokens t1{10, 11}, t2{12, 13}, t3{20}, t4{30};
  const std::vector<ChainSegment> segments{
      {.key = k2, .parent = k1, .begin = 2, .tokens = t2, .idle_seconds = 4.0},
      {.key = k1, .parent = root, .begin = 0, .tokens = t1, .idle_seconds = 2.0},
      {.key = k3, .parent = k1, .begin = 2, .tokens = t3, .idle_seconds = 3.0},
      {.key = k4, .parent = orphan_parent, .begin = 4, .tokens = t4},  // its parent is gone
  };
  add_segment_chains(builder, segments, kTreeHost);
  const Tokens on_device{10, 11, 12};
  builder.add(device(std::string(root.begin(), root.end()), on_device, "", 0.5));
  const CacheTree tree = builder.build();
  ASSERT_EQ(tree.namespaces.size(), 1u);
  const NamespaceTree& ns = tree.namespaces[0];
  EXPECT_EQ(ns.tokens, 5);  // 10 11 | 12 | 13, 20 — and never 30
  const TreeNode& top = *ns.root->children[0];
  EXPECT_EQ(top.tiers, kTreeHost | kTreeDevice);
  EXPECT_EQ(top.entries, 1);
  ASSERT_EQ(top.children.size(), 2u);
  const TreeNode& twelve = *top.children[0];
  EXPECT_EQ(twelve.tokens, (Tokens{12}));
  EXPECT_EQ(twelve.tiers, kTreeHost | kTreeDevice);
  ASSERT_EQ(twelve.children.size(), 1u);
  EXPECT_EQ(twelve.children[0]->tiers, kTreeHost);
  EXPECT_EQ(twelve.children[0]->idle_seconds, 4.0);
  EXPECT_EQ(top.children[1]->tokens, (Tokens{20}));
}

TEST(CacheTreeBuilder, TheLimitKeepsTheNodesNearestTheRootAndTheScopeFilters) {
  ScopeId mine{}, theirs{};
  mine[0] = 1;
  theirs[0] = 2;
  CacheTreeBuilder builder({.scope = mine, .node_limit = 2});
  const Tokens a{1, 2, 3}, b{1, 2, 4}, c{5};
  for (const Tokens* t : {&a, &b, &c}) {
    HeldSequence held = device(ns_of('m'), *t, "", 1.0);
    held.scope = mine;
    builder.add(held);
  }
  HeldSequence other = device(ns_of('o'), a, "", 1.0);
  other.scope = theirs;
  builder.add(other);
  const CacheTree tree = builder.build();
  ASSERT_EQ(tree.namespaces.size(), 1u);
  EXPECT_EQ(tree.namespaces[0].scope, mine);
  EXPECT_EQ(tree.namespaces[0].nodes, 4);  // counted before the cut
  EXPECT_TRUE(tree.truncated);
  const TreeNode& root = *tree.namespaces[0].root;
  ASSERT_EQ(root.children.size(), 2u);
  for (const auto& child : root.children) EXPECT_TRUE(child->children.empty());
}

}  // namespace
}  // namespace prefixd::cache
