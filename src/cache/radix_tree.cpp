#include "cache/radix_tree.h"

#include <algorithm>
#include <stdexcept>

namespace prefixd::cache {

// A violated precondition is a bug in the cache: in a checked tree it is reported where it happens
// (a logic error, which the checked configuration turns into an abort with the condition) instead
// of as a corrupt tree later.
void RadixTree::expect(bool holds, const char* condition) const {
  if (checked_ && !holds) throw std::logic_error(std::string("radix tree: expected ") + condition);
}

struct RadixTree::Node {
  std::vector<engine::Token> span;  // tokens on the edge from the parent to this node
  std::int32_t end = 0;             // position after the last token of `span`
  Node* parent = nullptr;
  std::map<engine::Token, std::unique_ptr<Node>> children;  // keyed by the child's first token
  std::vector<EntryId> ending_here;
  std::int32_t total = 0;                                     // entries in this subtree
  std::unordered_map<std::string, std::int32_t> by_session;  // entries in this subtree per session
  std::int32_t locks = 0;                                     // locks whose prefix covers this node

  std::int32_t begin() const { return end - static_cast<std::int32_t>(span.size()); }
};

RadixTree::RadixTree(bool checked) : root_(std::make_unique<Node>()), checked_(checked) {}
RadixTree::~RadixTree() = default;

RadixTree::Match RadixTree::match(std::span<const engine::Token> query, const std::string& session,
                                  const Reach& reach) const {
  // Walk down the query; every subtree we enter holds entries sharing the prefix walked so far.
  struct Best {
    std::int32_t length = 0;
    const Node* node = nullptr;
  } best_in, best_any;
  const Node* node = root_.get();
  size_t depth = 0;
  while (depth < query.size()) {
    auto it = node->children.find(query[depth]);
    if (it == node->children.end()) break;
    const Node* child = it->second.get();
    size_t k = 0;
    while (k < child->span.size() && depth + k < query.size() && child->span[k] == query[depth + k]) ++k;
    const auto reached = static_cast<std::int32_t>(depth + k);
    // Any entry of `child`'s subtree shares [0, reached) with the query, so the capped length is
    // shared too.
    best_any = {std::min(reached, reach.others), child};
    if (auto s = child->by_session.find(session); reach.own && s != child->by_session.end() && s->second > 0) {
      best_in = {reached, child};
    }
    if (k < child->span.size()) break;
    depth += k;
    node = child;
  }
  Match out;
  if (best_in.node != nullptr && best_in.length >= best_any.length) {
    out = {best_in.length, pick_entry(best_in.node, &session), true};
  } else if (best_any.node != nullptr && best_any.length > 0) {
    out = {best_any.length, pick_entry(best_any.node, nullptr), false};
  }
  return out;
}

RadixTree::Match RadixTree::match_whole(std::span<const engine::Token> query, const std::string& session,
                                        const Reach& reach) const {
  Match in, any;
  const Node* node = root_.get();
  size_t depth = 0;
  while (depth < query.size()) {
    auto it = node->children.find(query[depth]);
    if (it == node->children.end()) break;
    const Node* child = it->second.get();
    if (depth + child->span.size() > query.size() ||
        !std::equal(child->span.begin(), child->span.end(), query.begin() + static_cast<std::ptrdiff_t>(depth))) {
      break;
    }
    depth += child->span.size();
    node = child;
    for (EntryId id : node->ending_here) {
      const bool same = reach.own && entries_.at(id).session == session;
      if (!same && static_cast<std::int32_t>(depth) > reach.others) continue;
      any = {static_cast<std::int32_t>(depth), id, same};
      if (same) in = any;
    }
  }
  if (in.length > 0 && in.length >= any.length) return in;
  return any;
}

EntryId RadixTree::pick_entry(const Node* node, const std::string* session) const {
  // Descend to any entry of the subtree (of `session` when given); counts guarantee one exists.
  while (true) {
    for (EntryId id : node->ending_here) {
      if (session == nullptr || entries_.at(id).session == *session) return id;
    }
    const Node* next = nullptr;
    for (const auto& [token, child] : node->children) {
      if (session == nullptr) {
        if (child->total > 0) { next = child.get(); break; }
      } else if (auto s = child->by_session.find(*session); s != child->by_session.end() && s->second > 0) {
        next = child.get();
        break;
      }
    }
    expect(next != nullptr, "next != nullptr");
    if (next == nullptr) return 0;
    node = next;
  }
}

RadixTree::Node* RadixTree::split(Node* child, std::size_t k) {
  // A new middle node takes the first k tokens of the edge; counts and locks cover both halves.
  Node* parent = child->parent;
  auto slot = parent->children.find(child->span.front());
  auto middle = std::make_unique<Node>();
  middle->span.assign(child->span.begin(), child->span.begin() + static_cast<std::ptrdiff_t>(k));
  middle->end = parent->end + static_cast<std::int32_t>(k);
  middle->parent = parent;
  middle->total = child->total;
  middle->by_session = child->by_session;
  middle->locks = child->locks;
  std::unique_ptr<Node> moved = std::move(slot->second);
  moved->span.erase(moved->span.begin(), moved->span.begin() + static_cast<std::ptrdiff_t>(k));
  moved->parent = middle.get();
  const engine::Token first = moved->span.front();
  middle->children.emplace(first, std::move(moved));
  Node* raw = middle.get();
  slot->second = std::move(middle);
  return raw;
}

RadixTree::Node* RadixTree::node_at(std::span<const engine::Token> tokens, std::int32_t length) {
  Node* node = root_.get();
  auto depth = static_cast<size_t>(0);
  const auto want = static_cast<size_t>(length);
  while (depth < want) {
    auto it = node->children.find(tokens[depth]);
    if (it == node->children.end()) return nullptr;
    Node* child = it->second.get();
    size_t k = 0;
    while (k < child->span.size() && depth + k < want && child->span[k] == tokens[depth + k]) ++k;
    if (k < child->span.size()) {
      if (depth + k < want) return nullptr;  // the path diverges before `length`
      child = split(child, k);
    }
    depth += k;
    node = child;
  }
  return node;
}

void RadixTree::insert(EntryId id, std::span<const engine::Token> tokens, const std::string& session) {
  expect(!entries_.contains(id), "!entries_.contains(id)");
  Node* node = root_.get();
  size_t depth = 0;
  while (depth < tokens.size()) {
    auto it = node->children.find(tokens[depth]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->span.assign(tokens.begin() + static_cast<std::ptrdiff_t>(depth), tokens.end());
      leaf->end = static_cast<std::int32_t>(tokens.size());
      leaf->parent = node;
      unique_tokens_ += static_cast<std::int64_t>(leaf->span.size());
      Node* raw = leaf.get();
      node->children.emplace(tokens[depth], std::move(leaf));
      node = raw;
      break;
    }
    Node* child = it->second.get();
    size_t k = 0;
    while (k < child->span.size() && depth + k < tokens.size() && child->span[k] == tokens[depth + k]) ++k;
    if (k < child->span.size()) child = split(child, k);
    depth += k;
    node = child;
  }
  node->ending_here.push_back(id);
  for (Node* n = node; n != nullptr; n = n->parent) {
    n->total += 1;
    n->by_session[session] += 1;
  }
  entries_[id] = EntryRecord{node, session};
}

void RadixTree::prune(Node* node) {
  // Remove nodes no entry passes through any more (never the root).
  while (node != root_.get() && node->total == 0) {
    expect(node->locks == 0, "node->locks == 0");
    Node* parent = node->parent;
    unique_tokens_ -= static_cast<std::int64_t>(node->span.size());
    if (node->locks > 0) locked_tokens_ -= static_cast<std::int64_t>(node->span.size());
    parent->children.erase(node->span.front());
    node = parent;
  }
}

void RadixTree::erase(EntryId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Node* node = it->second.node;
  const std::string session = it->second.session;
  entries_.erase(it);
  std::erase(node->ending_here, id);
  for (Node* n = node; n != nullptr; n = n->parent) {
    n->total -= 1;
    if (auto s = n->by_session.find(session); s != n->by_session.end() && --s->second == 0) n->by_session.erase(s);
  }
  prune(node);
}

void RadixTree::truncate(EntryId id, std::int32_t length) {
  EntryRecord& record = entries_.at(id);
  Node* old_node = record.node;
  if (length >= old_node->end) return;
  std::vector<engine::Token> path(static_cast<size_t>(old_node->end));
  for (const Node* n = old_node; n != root_.get(); n = n->parent) {
    std::copy(n->span.begin(), n->span.end(), path.begin() + n->begin());
  }
  Node* target = node_at(path, length);
  expect(target != nullptr, "target != nullptr");
  std::erase(old_node->ending_here, id);
  // Counts move from the part of the path below `target` only.
  for (Node* n = old_node; n != target; n = n->parent) {
    n->total -= 1;
    if (auto s = n->by_session.find(record.session); s != n->by_session.end() && --s->second == 0) n->by_session.erase(s);
  }
  target->ending_here.push_back(id);
  record.node = target;
  prune(old_node);
}

std::int32_t RadixTree::length(EntryId id) const { return entries_.at(id).node->end; }

void RadixTree::lock(std::span<const engine::Token> tokens, std::int32_t length) {
  if (length <= 0) return;
  Node* node = node_at(tokens, length);
  expect(node != nullptr, "node != nullptr");
  for (Node* n = node; n != nullptr && n != root_.get(); n = n->parent) {
    if (n->locks++ == 0) locked_tokens_ += static_cast<std::int64_t>(n->span.size());
  }
}

void RadixTree::unlock(std::span<const engine::Token> tokens, std::int32_t length) {
  if (length <= 0) return;
  Node* node = node_at(tokens, length);
  expect(node != nullptr, "node != nullptr");
  for (Node* n = node; n != nullptr && n != root_.get(); n = n->parent) {
    expect(n->locks > 0, "n->locks > 0");
    if (--n->locks == 0) locked_tokens_ -= static_cast<std::int64_t>(n->span.size());
  }
}

std::int32_t RadixTree::keep_length(EntryId id) const {
  const Node* node = entries_.at(id).node;
  while (node != root_.get() && node->total == 1 && node->locks == 0) node = node->parent;
  return node->end;
}

std::int32_t RadixTree::locked_length(EntryId id) const {
  const Node* node = entries_.at(id).node;
  while (node != root_.get() && node->locks == 0) node = node->parent;
  return node->end;
}

bool RadixTree::shared_with_another(EntryId id, std::int32_t length) const {
  if (length <= 0) return false;
  const Node* node = entries_.at(id).node;
  while (node->parent != nullptr && node->begin() >= length) node = node->parent;
  return node != root_.get() && node->total > 1;
}

}  // namespace prefixd::cache
