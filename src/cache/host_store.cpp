#include "cache/host_store.h"

#include <algorithm>

namespace prefixd::cache {

HostStore::HostStore(std::uint64_t capacity_bytes, std::int64_t max_segments)
    : capacity_bytes_(capacity_bytes), max_segments_(max_segments) {}

std::vector<Digest> HostStore::children(const Digest& parent, engine::Token first_token) const {
  std::vector<Digest> keys;
  auto [first, last] = by_branch_.equal_range(Branch{parent, first_token});
  for (auto it = first; it != last; ++it) keys.push_back(it->second);
  return keys;
}

std::vector<std::pair<Digest, Digest>> HostStore::parent_links() const {
  std::vector<std::pair<Digest, Digest>> out;
  out.reserve(by_branch_.size());
  for (const auto& [branch, key] : by_branch_) out.emplace_back(branch.parent, key);
  return out;
}

std::optional<SegmentIndex::Compared> HostStore::compare(const Digest& key, std::span<const engine::Token> rest) const {
  const HostSegment* segment = peek(key);
  if (segment == nullptr) return std::nullopt;
  const auto common = std::ranges::mismatch(segment->token_ids, rest).in1 - segment->token_ids.begin();
  return Compared{segment->begin, static_cast<std::int32_t>(segment->token_ids.size()), static_cast<std::int32_t>(common)};
}

const HostSegment* HostStore::peek(const Digest& key) const {
  auto it = segments_.find(key);
  return it == segments_.end() ? nullptr : &it->second.segment;
}

const HostSegment* HostStore::touch(const Digest& key) {
  auto it = segments_.find(key);
  if (it == segments_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  it->second.segment.last_used = std::chrono::steady_clock::now();
  return &it->second.segment;
}

bool HostStore::insert(const Digest& key, HostSegment segment, Evicted& evicted, std::span<const Digest> keep) {
  if (segment.state.size() > capacity_bytes_ || max_segments_ < 1 || segment.token_ids.empty()) return false;
  erase(key);
  const auto victim_is_kept = [&] { return std::find(keep.begin(), keep.end(), victim()) != keep.end(); };
  while (!lru_.empty() && bytes_ + segment.state.size() > capacity_bytes_) {
    if (victim_is_kept()) return false;
    evict_one(EvictReason::capacity, evicted);
  }
  while (!lru_.empty() && static_cast<std::int64_t>(segments_.size()) >= max_segments_) {
    if (victim_is_kept()) return false;
    evict_one(EvictReason::lru, evicted);
  }
  bytes_ += segment.state.size();
  tokens_ += segment.tokens;
  by_scope_[segment.scope].add(segment.state.size(), segment.tokens);
  segment.last_used = std::chrono::steady_clock::now();
  lru_.push_front(key);
  by_branch_.emplace(branch_of(segment), key);
  segments_.emplace(key, Slot{std::move(segment), lru_.begin()});
  changed_.touched(key);
  return true;
}

void HostStore::expire(std::chrono::steady_clock::time_point older_than, Evicted& evicted) {
  // Oldest first; retained segments stay, whatever their age.
  auto it = lru_.end();
  while (it != lru_.begin()) {
    const auto older = std::prev(it);
    if (segments_.at(*older).segment.last_used >= older_than) break;
    if (retained_ && retained_(*older)) {
      it = older;
      continue;
    }
    const Digest key = *older;
    if (spill_) spill_(key, segments_.at(key).segment);
    erase(key);  // `it` stays valid: only `older` leaves the list
    ++evicted.ttl;
  }
}

const Digest& HostStore::victim() const {
  if (retained_) {
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
      if (!retained_(*it)) return *it;
    }
  }
  return lru_.back();
}

void HostStore::evict_one(EvictReason reason, Evicted& evicted) {
  const Digest victim = this->victim();
  if (spill_) spill_(victim, segments_.at(victim).segment);
  erase(victim);
  switch (reason) {
    case EvictReason::lru: ++evicted.lru; break;
    case EvictReason::ttl: ++evicted.ttl; break;
    case EvictReason::capacity: ++evicted.capacity; break;
  }
}

void HostStore::erase(const Digest& key) {
  auto it = segments_.find(key);
  if (it == segments_.end()) return;
  const HostSegment& segment = it->second.segment;
  bytes_ -= segment.state.size();
  tokens_ -= segment.tokens;
  by_scope_[segment.scope].remove(segment.state.size(), segment.tokens);
  settle(by_scope_, segment.scope);
  auto [first, last] = by_branch_.equal_range(branch_of(it->second.segment));
  for (auto child = first; child != last; ++child) {
    if (child->second == key) {
      by_branch_.erase(child);
      break;
    }
  }
  lru_.erase(it->second.lru);
  segments_.erase(it);
  changed_.touched(key);
}

std::string HostStore::verify_lru_order() const {
  std::unordered_map<Digest, size_t, DigestHash> recency;  // 0: most recently used
  size_t rank = 0;
  for (const Digest& key : lru_) recency[key] = rank++;
  for (const auto& [key, slot] : segments_) {
    auto parent = recency.find(slot.segment.parent);
    if (parent != recency.end() && parent->second > recency.at(key)) {
      return "host segment at position " + std::to_string(slot.segment.begin) + " is more recently used than its parent; ";
    }
  }
  return {};
}

std::int64_t HostStore::clear() {
  const auto freed = static_cast<std::int64_t>(bytes_);
  for (const auto& [key, slot] : segments_) changed_.touched(key);
  segments_.clear();
  by_branch_.clear();
  lru_.clear();
  bytes_ = 0;
  tokens_ = 0;
  by_scope_.clear();
  return freed;
}

ScopeUsage HostStore::clear_scope(const ScopeId& scope) {
  const auto it = by_scope_.find(scope);
  if (it == by_scope_.end()) return {};
  const ScopeUsage held = it->second;
  std::vector<Digest> keys;
  for (const auto& [key, slot] : segments_) {
    if (slot.segment.scope == scope) keys.push_back(key);
  }
  for (const Digest& key : keys) erase(key);
  return held;
}

}  // namespace prefixd::cache
