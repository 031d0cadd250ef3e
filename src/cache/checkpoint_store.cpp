#include "cache/checkpoint_store.h"

#include <algorithm>
#include <array>
#include <unordered_set>

namespace prefixd::cache {

using engine::Pos;
using engine::Token;

const char* refusal_name(Refusal refusal) {
  static constexpr std::array<const char*, kRefusalCount> kNames = {"diverged", "evicted", "namespace"};
  return kNames.at(static_cast<size_t>(refusal));
}

CheckpointStore::CheckpointStore(const BlockHasher& hasher, std::uint64_t capacity_bytes, std::int64_t max_entries,
                                 std::int32_t per_session)
    : hasher_(hasher), capacity_bytes_(capacity_bytes), max_entries_(std::max<std::int64_t>(0, max_entries)),
      per_session_(std::max(1, per_session)) {}

Digest CheckpointStore::key_of(const Lineage& lineage, std::span<const Token> tokens, std::span<const Digest> chain,
                               Pos position) const {
  const std::int32_t block = hasher_.block_size();
  const auto whole = static_cast<size_t>(position / block);
  const Digest parent = hasher_.parent(lineage, chain, static_cast<Pos>(whole) * block, position);
  // The partial block is hashed even when empty, so a checkpoint's key never equals the chain
  // hash that names a host segment ending at the same position.
  return hasher_.next(parent, tokens.subspan(whole * static_cast<size_t>(block), static_cast<size_t>(position) - whole * static_cast<size_t>(block)));
}

bool CheckpointStore::save(const Lineage& lineage, std::span<const Token> prefix, std::span<const Digest> chain,
                           engine::Bytes state, const std::string& session, CheckpointKind kind,
                           engine::Pos window_from, const ScopeId& scope) {
  const auto position = static_cast<Pos>(prefix.size());
  if (position <= 0 || state.empty()) return false;
  const std::string& ns = lineage.ns;
  const Digest key = key_of(lineage, prefix, chain, position);
  if (entries_.contains(key)) {
    touch(key);
    keep_in_chain(session, key, lineage, position, kind, prefix, chain);
    return true;
  }
  if (state.size() > capacity_bytes_ || max_entries_ == 0) return false;
  evict_lru_for(state.size());
  lru_.push_front(key);
  Slot& slot = entries_[key];
  slot = Slot{Checkpoint{ns, position, std::move(state), std::chrono::steady_clock::now(), window_from, scope},
              lru_.begin()};
  bytes_ += slot.checkpoint.state.size();
  by_scope_[scope].add(slot.checkpoint.state.size(), 0);
  positions_[ns][position] += 1;
  counted_.saved += 1;
  keep_in_chain(session, key, lineage, position, kind, prefix, chain);
  return true;
}

void CheckpointStore::evict_lru_for(std::uint64_t incoming) {
  while (!lru_.empty() && (bytes_ + incoming > capacity_bytes_ || static_cast<std::int64_t>(entries_.size()) >= max_entries_)) {
    if (bytes_ + incoming > capacity_bytes_) {
      counted_.evictions_capacity += 1;
    } else {
      counted_.evictions_lru += 1;
    }
    remove(Digest(victim()));
  }
}

const Digest& CheckpointStore::victim() const {
  if (retained_) {
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
      if (!retained_(*it)) return *it;
    }
  }
  return lru_.back();
}

CheckpointStore::Found CheckpointStore::find(const Lineage& lineage, std::span<const Token> query,
                                             std::span<const Digest> chain, Pos limit) const {
  auto index = positions_.find(lineage.ns);
  if (index == positions_.end()) return {};
  limit = std::min<Pos>(limit, static_cast<Pos>(query.size()));
  for (auto it = index->second.upper_bound(limit); it != index->second.begin();) {
    --it;
    const Digest key = key_of(lineage, query, chain, it->first);
    if (auto found = entries_.find(key); found != entries_.end()) return {key, it->first, &found->second.checkpoint};
  }
  return {};
}

void CheckpointStore::used(const Digest& key, const std::string& session) {
  if (!entries_.contains(key)) return;
  counted_.restored += 1;
  touch(key);
  const Checkpoint& c = entries_.at(key).checkpoint;
  keep_in_chain(session, key, Lineage{c.ns}, c.position, CheckpointKind::boundary);
}

void CheckpointStore::touch(const Digest& key) {
  Slot& slot = entries_.at(key);
  lru_.splice(lru_.begin(), lru_, slot.lru);
  slot.checkpoint.last_used = std::chrono::steady_clock::now();
}

// (Only the namespace of `lineage` is kept in a link; its fork matters only for the keys of
// `prefix`, which a prompt end compares.)
void CheckpointStore::keep_in_chain(const std::string& session, const Digest& key, const Lineage& lineage,
                                    Pos position, CheckpointKind kind, std::span<const Token> prefix,
                                    std::span<const Digest> chain) {
  const std::string& ns = lineage.ns;
  if (session.empty()) return;  // anonymous requests share no chain; their checkpoints live by LRU
  Chain& links = chains_[session];
  if (kind == CheckpointKind::prompt_end && !prefix.empty()) {
    // Tails this prefix extends served their resend or next turn; the conversation moved on. (A
    // prompt's end and the position before it are one request's pair: neither supersedes the other.)
    std::vector<Digest> superseded;
    std::erase_if(links, [&](const Link& l) {
      const bool extended = l.end && l.ns == ns && l.position + 1 < position && l.key != key &&
                            key_of(lineage, prefix, chain, l.position) == l.key;
      if (extended) superseded.push_back(l.key);
      return extended;
    });
    for (const Digest& old : superseded) unlink(old);
  }
  if (std::ranges::any_of(links, [&](const Link& l) { return l.key == key; })) return;
  links.push_back(Link{key, ns, position, kind != CheckpointKind::boundary});
  links_[key] += 1;
  while (static_cast<std::int32_t>(links.size()) > per_session_) {
    // The oldest link goes: a conversation's newest turns are the ones its next request resumes.
    const Digest old = links.front().key;
    links.erase(links.begin());
    unlink(old);
  }
}

// A checkpoint no chain names any more was kept for sessions alone and goes with its last link.
void CheckpointStore::unlink(const Digest& key) {
  auto link = links_.find(key);
  if (--link->second > 0) return;
  links_.erase(link);
  if (entries_.contains(key) && !(retained_ && retained_(key))) {
    counted_.superseded += 1;
    remove(key);
  }
}

void CheckpointStore::erase(const Digest& key) {
  if (entries_.contains(key)) remove(key);
}

void CheckpointStore::remove(const Digest& key) {
  auto it = entries_.find(key);
  const Checkpoint& c = it->second.checkpoint;
  bytes_ -= c.state.size();
  by_scope_[c.scope].remove(c.state.size(), 0);
  settle(by_scope_, c.scope);
  auto index = positions_.find(c.ns);
  if (--index->second[c.position] == 0) index->second.erase(c.position);
  if (index->second.empty()) positions_.erase(index);
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

std::optional<Refusal> CheckpointStore::classify_refusal(const std::string& session, const Lineage& lineage,
                                                         std::span<const Token> query, std::span<const Digest> chain,
                                                         Pos reused) {
  const std::string& ns = lineage.ns;
  auto it = chains_.find(session);
  if (session.empty() || it == chains_.end()) return std::nullopt;
  // The link that would have served furthest decides: evicted (its prefix matches but the state is
  // gone), another namespace (same session, different model/template/salt), or diverged.
  std::optional<Refusal> cause;
  Pos best = reused;
  for (const Link& link : it->second) {
    if (link.position <= best || link.position >= static_cast<Pos>(query.size())) continue;
    Refusal why = Refusal::diverged;
    if (link.ns != ns) {
      why = Refusal::ns;
    } else if (key_of(lineage, query, chain, link.position) == link.key) {
      if (entries_.contains(link.key)) continue;  // usable: not a refusal (the attention part was missing)
      why = Refusal::evicted;
    }
    best = link.position;
    cause = why;
  }
  if (cause) {
    switch (*cause) {
      case Refusal::diverged: counted_.refusals_diverged += 1; break;
      case Refusal::evicted: counted_.refusals_evicted += 1; break;
      case Refusal::ns: counted_.refusals_namespace += 1; break;
    }
  }
  return cause;
}

void CheckpointStore::expire(std::chrono::steady_clock::time_point older_than) {
  // Oldest first; retained checkpoints stay, whatever their age.
  auto it = lru_.end();
  while (it != lru_.begin()) {
    const auto older = std::prev(it);
    if (entries_.at(*older).checkpoint.last_used >= older_than) break;
    if (retained_ && retained_(*older)) {
      it = older;
      continue;
    }
    counted_.evictions_ttl += 1;
    remove(Digest(*older));  // `it` stays valid: only `older` leaves the list
  }
  // A chain none of whose checkpoints exists any more can explain no refusal worth keeping.
  std::erase_if(chains_, [this](const auto& item) {
    const Chain& chain = item.second;
    if (std::ranges::any_of(chain, [this](const Link& l) { return entries_.contains(l.key); })) return false;
    for (const Link& l : chain) {
      if (auto link = links_.find(l.key); --link->second == 0) links_.erase(link);
    }
    return true;
  });
}

std::uint64_t CheckpointStore::clear() {
  const std::uint64_t freed = bytes_;
  entries_.clear();
  lru_.clear();
  positions_.clear();
  chains_.clear();
  links_.clear();
  by_scope_.clear();
  bytes_ = 0;
  return freed;
}

ScopeUsage CheckpointStore::clear_scope(const ScopeId& scope) {
  const auto it = by_scope_.find(scope);
  if (it == by_scope_.end()) return {};
  const ScopeUsage held = it->second;
  std::unordered_set<Digest, DigestHash> keys;
  for (const auto& [key, slot] : entries_) {
    if (slot.checkpoint.scope == scope) keys.insert(key);
  }
  for (const Digest& key : keys) remove(key);
  forget_links(keys);
  return held;
}

void CheckpointStore::forget_links(const std::unordered_set<Digest, DigestHash>& keys) {
  // Links to removed checkpoints would count them as evicted: the chains forget them.
  for (auto& [session, chain] : chains_) {
    std::erase_if(chain, [&](const Link& l) {
      if (!keys.contains(l.key)) return false;
      if (auto link = links_.find(l.key); link != links_.end() && --link->second == 0) links_.erase(link);
      return true;
    });
  }
  std::erase_if(chains_, [](const auto& item) { return item.second.empty(); });
}

ScopeUsage CheckpointStore::discard(std::span<const Digest> keys) {
  ScopeUsage held;
  std::unordered_set<Digest, DigestHash> gone;
  for (const Digest& key : keys) {
    const auto it = entries_.find(key);
    if (it == entries_.end() || gone.contains(key)) continue;
    held.entries += 1;
    held.bytes += it->second.checkpoint.state.size();
    remove(key);
    gone.insert(key);
  }
  forget_links(gone);
  return held;
}

std::vector<engine::Pos> CheckpointStore::positions(const std::string& ns) const {
  std::vector<engine::Pos> out;
  if (auto it = positions_.find(ns); it != positions_.end()) {
    for (const auto& [position, count] : it->second) out.push_back(position);
  }
  return out;
}

std::string CheckpointStore::verify() const {
  std::uint64_t bytes = 0;
  std::map<std::pair<std::string, Pos>, std::int32_t> at;
  for (const auto& [key, slot] : entries_) {
    bytes += slot.checkpoint.state.size();
    at[{slot.checkpoint.ns, slot.checkpoint.position}] += 1;
    if (*slot.lru != key) return "checkpoint LRU link points at another key";
  }
  if (bytes != bytes_) return "checkpoint byte total disagrees with the entries";
  if (lru_.size() != entries_.size()) return "checkpoint LRU list size disagrees with the entries";
  if (bytes_ > capacity_bytes_) return "checkpoint bytes above capacity";
  std::size_t indexed = 0;
  for (const auto& [ns, positions] : positions_) {
    for (const auto& [pos, count] : positions) {
      if (at[{ns, pos}] != count) return "checkpoint position index disagrees with the entries";
      indexed += 1;
    }
  }
  if (indexed != at.size()) return "checkpoint position index misses a position";
  std::unordered_map<Digest, std::int32_t, DigestHash> named;
  for (const auto& [session, chain] : chains_) {
    if (static_cast<std::int32_t>(chain.size()) > per_session_) return "a session chain exceeds its bound";
    for (const Link& link : chain) named[link.key] += 1;
  }
  if (named != links_) return "checkpoint chain link counts disagree with the chains";
  return {};
}

}  // namespace prefixd::cache
