#include "cache/radix_tree.h"

#include <algorithm>
#include <cassert>

namespace prefixd::cache {

struct RadixTree::Node {
  std::vector<engine::Token> span;  // tokens on the edge from the parent to this node
  Node* parent = nullptr;
  std::map<engine::Token, std::unique_ptr<Node>> children;  // keyed by the child's first token
  std::vector<EntryId> ending_here;
  std::int32_t total = 0;                              // entries in this subtree
  std::unordered_map<std::string, std::int32_t> by_session;  // entries in this subtree per session
};

RadixTree::RadixTree() : root_(std::make_unique<Node>()) {}
RadixTree::~RadixTree() = default;

RadixTree::Match RadixTree::match(std::span<const engine::Token> query, const std::string& session) const {
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
    best_any = {reached, child};
    if (auto s = child->by_session.find(session); s != child->by_session.end() && s->second > 0) {
      best_in = {reached, child};
    }
    if (k < child->span.size()) break;
    depth += k;
    node = child;
  }
  Match out;
  if (best_in.node != nullptr && best_in.length >= best_any.length) {
    out = {best_in.length, pick_entry(best_in.node, &session), true};
  } else if (best_any.node != nullptr) {
    out = {best_any.length, pick_entry(best_any.node, nullptr), false};
  }
  return out;
}

RadixTree::Match RadixTree::match_whole(std::span<const engine::Token> query, const std::string& session) const {
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
      const bool same = entries_.at(id).session == session;
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
    assert(next != nullptr);
    if (next == nullptr) return 0;
    node = next;
  }
}

void RadixTree::insert(EntryId id, std::span<const engine::Token> tokens, const std::string& session) {
  erase(id);
  Node* node = root_.get();
  size_t depth = 0;
  while (depth < tokens.size()) {
    auto it = node->children.find(tokens[depth]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->span.assign(tokens.begin() + static_cast<std::ptrdiff_t>(depth), tokens.end());
      leaf->parent = node;
      unique_tokens_ += static_cast<std::int64_t>(leaf->span.size());
      Node* raw = leaf.get();
      node->children.emplace(tokens[depth], std::move(leaf));
      node = raw;
      depth = tokens.size();
      break;
    }
    Node* child = it->second.get();
    size_t k = 0;
    while (k < child->span.size() && depth + k < tokens.size() && child->span[k] == tokens[depth + k]) ++k;
    if (k < child->span.size()) {
      // Split the edge at k: a new middle node takes the shared part.
      auto middle = std::make_unique<Node>();
      middle->span.assign(child->span.begin(), child->span.begin() + static_cast<std::ptrdiff_t>(k));
      middle->parent = node;
      middle->total = child->total;
      middle->by_session = child->by_session;
      std::unique_ptr<Node> moved = std::move(it->second);
      moved->span.erase(moved->span.begin(), moved->span.begin() + static_cast<std::ptrdiff_t>(k));
      moved->parent = middle.get();
      const engine::Token first = moved->span.front();
      middle->children.emplace(first, std::move(moved));
      Node* raw = middle.get();
      it->second = std::move(middle);
      child = raw;
    }
    depth += k;
    node = child;
  }
  node->ending_here.push_back(id);
  for (Node* n = node; n != nullptr; n = n->parent) {
    n->total += 1;
    n->by_session[session] += 1;
  }
  entries_[id] = EntryRecord{node, session, static_cast<std::int32_t>(tokens.size())};
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
  // Prune nodes no entry passes through any more (never the root).
  while (node != root_.get() && node->total == 0) {
    Node* parent = node->parent;
    unique_tokens_ -= static_cast<std::int64_t>(node->span.size());
    parent->children.erase(node->span.front());
    node = parent;
  }
}

}  // namespace prefixd::cache
