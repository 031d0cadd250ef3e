#include "cache/cache_tree.h"

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace prefixd::cache {
namespace {

constexpr std::size_t kMaxSessionsPerNode = 16;  // a node shared by thousands of sessions lists a few

void mark(TreeNode& node, const HeldSequence& held) {
  node.tiers |= held.tier;
  if (held.entry) {
    node.entries += 1;
    if (!held.session.empty() && node.sessions.size() < kMaxSessionsPerNode) {
      const auto at = std::ranges::lower_bound(node.sessions, held.session);
      if (at == node.sessions.end() || *at != held.session) node.sessions.insert(at, held.session);
    }
    node.locked_until = std::max(node.locked_until, held.locked);
  }
  if (held.idle_seconds && (!node.idle_seconds || *held.idle_seconds < *node.idle_seconds)) {
    node.idle_seconds = held.idle_seconds;
  }
}

// Splits `slot`'s node after its first `k` tokens: the upper part takes its place and keeps every
// mark (whatever passes through the lower part passes through it), the lower part is its child.
TreeNode& split(std::unique_ptr<TreeNode>& slot, std::size_t k) {
  auto upper = std::make_unique<TreeNode>();
  TreeNode& lower = *slot;
  upper->begin = lower.begin;
  upper->end = lower.begin + static_cast<engine::Pos>(k);
  upper->tokens.assign(lower.tokens.begin(), lower.tokens.begin() + static_cast<std::ptrdiff_t>(k));
  upper->tiers = lower.tiers;
  upper->entries = lower.entries;
  upper->sessions = lower.sessions;
  upper->locked_until = lower.locked_until;
  upper->idle_seconds = lower.idle_seconds;
  lower.tokens.erase(lower.tokens.begin(), lower.tokens.begin() + static_cast<std::ptrdiff_t>(k));
  lower.begin = upper->end;
  upper->children.push_back(std::move(slot));
  slot = std::move(upper);
  return *slot;
}

void insert(TreeNode& root, const HeldSequence& held) {
  TreeNode* node = &root;
  const auto tokens = held.tokens;
  std::size_t pos = 0;
  while (pos < tokens.size()) {
    auto slot = std::ranges::find_if(node->children, [&](const auto& c) { return c->tokens.front() == tokens[pos]; });
    if (slot == node->children.end()) {
      auto leaf = std::make_unique<TreeNode>();
      leaf->begin = static_cast<engine::Pos>(pos);
      leaf->end = static_cast<engine::Pos>(tokens.size());
      leaf->tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(pos), tokens.end());
      mark(*leaf, held);
      node->children.push_back(std::move(leaf));
      return;
    }
    const auto& edge = (*slot)->tokens;
    std::size_t k = 0;
    while (k < edge.size() && pos + k < tokens.size() && edge[k] == tokens[pos + k]) ++k;
    TreeNode& next = k < edge.size() ? split(*slot, k) : **slot;
    mark(next, held);
    node = &next;
    pos += k;
  }
}

void count(const TreeNode& node, std::int64_t& tokens, std::int64_t& nodes) {
  for (const auto& child : node.children) {
    tokens += child->end - child->begin;
    nodes += 1;
    count(*child, tokens, nodes);
  }
}

void order_children(TreeNode& node) {
  // Most recently used first: what a person looking at the cache asks about.
  std::ranges::stable_sort(node.children, [](const auto& a, const auto& b) {
    return a->idle_seconds.value_or(1e300) < b->idle_seconds.value_or(1e300);
  });
  for (auto& child : node.children) order_children(*child);
}

}  // namespace

struct CacheTreeBuilder::Impl {
  TreeQuery query;
  std::map<std::string, NamespaceTree> trees;
};

CacheTreeBuilder::CacheTreeBuilder(TreeQuery query) : impl_(std::make_unique<Impl>()) { impl_->query = std::move(query); }
CacheTreeBuilder::~CacheTreeBuilder() = default;

void CacheTreeBuilder::add(const HeldSequence& held) {
  if (held.tokens.empty()) return;
  if (impl_->query.scope && *impl_->query.scope != held.scope) return;
  auto [it, fresh] = impl_->trees.try_emplace(held.ns);
  NamespaceTree& tree = it->second;
  if (fresh) {
    tree.ns = held.ns;
    tree.scope = held.scope;
    tree.root = std::make_unique<TreeNode>();
  }
  insert(*tree.root, held);
}

CacheTree CacheTreeBuilder::build() {
  CacheTree out;
  out.node_limit = std::max<std::int64_t>(0, impl_->query.node_limit);
  for (auto& [ns, tree] : impl_->trees) {
    count(*tree.root, tree.tokens, tree.nodes);
    order_children(*tree.root);
    out.namespaces.push_back(std::move(tree));
  }
  impl_->trees.clear();
  std::ranges::stable_sort(out.namespaces, [](const auto& a, const auto& b) { return a.tokens > b.tokens; });
  // Past the limit, the nodes nearest a root are kept: breadth first over every namespace.
  std::deque<TreeNode*> queue;
  for (auto& tree : out.namespaces) queue.push_back(tree.root.get());
  std::int64_t kept = 0;
  while (!queue.empty()) {
    TreeNode* node = queue.front();
    queue.pop_front();
    for (auto& child : node->children) {
      if (kept < out.node_limit) {
        kept += 1;
        queue.push_back(child.get());
      } else {
        child.reset();
        out.truncated = true;
      }
    }
    std::erase_if(node->children, [](const auto& c) { return c == nullptr; });
  }
  return out;
}

void add_segment_chains(CacheTreeBuilder& builder, std::span<const ChainSegment> segments, std::uint8_t tier) {
  std::unordered_map<Digest, const ChainSegment*, DigestHash> by_key;
  std::unordered_set<Digest, DigestHash> parents;
  for (const auto& s : segments) {
    by_key.emplace(s.key, &s);
    parents.insert(s.parent);
  }
  std::unordered_set<Digest, DigestHash> added;
  for (const auto& leaf : segments) {
    if (parents.contains(leaf.key)) continue;  // reached from the leaves below it
    // The chain from the root down to this leaf; a gap (a parent evicted first) ends it unusable.
    std::vector<const ChainSegment*> chain{&leaf};
    while (chain.back()->begin > 0) {
      const auto up = by_key.find(chain.back()->parent);
      if (up == by_key.end() || up->second->begin + static_cast<engine::Pos>(up->second->tokens.size()) != chain.back()->begin) break;
      chain.push_back(up->second);
    }
    if (chain.back()->begin != 0) continue;
    std::ranges::reverse(chain);
    std::vector<engine::Token> tokens;
    for (const ChainSegment* s : chain) tokens.insert(tokens.end(), s->tokens.begin(), s->tokens.end());
    const std::string ns(reinterpret_cast<const char*>(chain.front()->parent.data()), chain.front()->parent.size());
    for (const ChainSegment* s : chain) {
      if (!added.insert(s->key).second) continue;
      const auto end = static_cast<std::size_t>(s->begin) + s->tokens.size();
      builder.add(HeldSequence{.ns = ns, .scope = s->scope, .tier = tier,
                               .tokens = std::span(tokens).first(end), .idle_seconds = s->idle_seconds});
    }
  }
}

}  // namespace prefixd::cache
