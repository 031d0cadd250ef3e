#include "cache/host_store.h"

namespace prefixd::cache {

HostStore::HostStore(std::uint64_t capacity_bytes, std::int64_t max_segments)
    : capacity_bytes_(capacity_bytes), max_segments_(max_segments) {}

const HostSegment* HostStore::touch(const Digest& key) {
  auto it = segments_.find(key);
  if (it == segments_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  it->second.segment.last_used = std::chrono::steady_clock::now();
  return &it->second.segment;
}

bool HostStore::insert(const Digest& key, HostSegment segment, Evicted& evicted) {
  if (segment.state.size() > capacity_bytes_ || max_segments_ < 1) return false;
  erase(key);
  while (!lru_.empty() && bytes_ + segment.state.size() > capacity_bytes_) evict_one(EvictReason::capacity, evicted);
  while (!lru_.empty() && static_cast<std::int64_t>(segments_.size()) >= max_segments_) {
    evict_one(EvictReason::lru, evicted);
  }
  bytes_ += segment.state.size();
  segment.last_used = std::chrono::steady_clock::now();
  lru_.push_front(key);
  segments_.emplace(key, Slot{std::move(segment), lru_.begin()});
  return true;
}

void HostStore::expire(std::chrono::steady_clock::time_point older_than, Evicted& evicted) {
  while (!lru_.empty() && segments_.at(lru_.back()).segment.last_used < older_than) {
    evict_one(EvictReason::ttl, evicted);
  }
}

void HostStore::evict_one(EvictReason reason, Evicted& evicted) {
  const Digest victim = lru_.back();
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
  bytes_ -= it->second.segment.state.size();
  lru_.erase(it->second.lru);
  segments_.erase(it);
}

std::int64_t HostStore::clear() {
  const auto freed = static_cast<std::int64_t>(bytes_);
  segments_.clear();
  lru_.clear();
  bytes_ = 0;
  return freed;
}

}  // namespace prefixd::cache
