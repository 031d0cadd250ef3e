#include "api/responses/response_store.h"

#include <utility>

namespace prefixd::api {
namespace {

// The tenant and the id, which neither may forge into another's: a tenant id never holds '\n'.
std::string key_of(const std::string& tenant, const std::string& id) { return tenant + '\n' + id; }

}  // namespace

ResponseStore::ResponseStore(std::size_t capacity_bytes, std::chrono::seconds ttl) : capacity_bytes_(capacity_bytes), ttl_(ttl) {}

void ResponseStore::put(const std::string& tenant, const std::string& id, StoredResponse response, Clock::time_point now) {
  std::size_t bytes = response.object.dump().size() + response.conversation.dump().size() + id.size() + tenant.size();
  for (const ImageInput& media : response.media) bytes += media.bytes.size() + media.param.size();
  std::lock_guard lock(mutex_);
  expire(now);
  const std::string key = key_of(tenant, id);
  if (auto found = index_.find(key); found != index_.end()) drop(found->second);
  if (bytes > capacity_bytes_) return;
  while (bytes_ + bytes > capacity_bytes_ && !entries_.empty()) {
    drop(std::prev(entries_.end()));
    ++evicted_;
  }
  entries_.push_front(Entry{.key = key, .response = std::move(response), .bytes = bytes, .stored = now});
  index_[key] = entries_.begin();
  bytes_ += bytes;
}

std::optional<StoredResponse> ResponseStore::find(const std::string& tenant, const std::string& id, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  expire(now);
  const auto found = index_.find(key_of(tenant, id));
  if (found == index_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, found->second);
  return found->second->response;
}

bool ResponseStore::erase(const std::string& tenant, const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto found = index_.find(key_of(tenant, id));
  if (found == index_.end()) return false;
  drop(found->second);
  return true;
}

ResponseStoreStats ResponseStore::stats() const {
  std::lock_guard lock(mutex_);
  return {.responses = entries_.size(), .bytes = bytes_, .evicted = evicted_};
}

void ResponseStore::drop(std::list<Entry>::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->key);
  entries_.erase(it);
}

// Age counts from when a response was stored, not last read: the TTL bounds how long a
// conversation is kept at all.
void ResponseStore::expire(Clock::time_point now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (now - it->stored >= ttl_) {
      const auto next = std::next(it);
      drop(it);
      ++evicted_;
      it = next;
    } else {
      ++it;
    }
  }
}

}  // namespace prefixd::api
