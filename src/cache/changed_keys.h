// prefixd cache — the keys a store inserted or removed since its reader last asked: how the
// holdings ledger (holdings_summary.cpp) keeps its view of the host and disk tiers current
// without walking a hundred thousand segments at every look.
//
// Off until the reader first asks (a store nobody reads keeps nothing); bounded: past `limit`
// keys it forgets them and tells the reader to walk the whole store once, so it never holds more
// than about the store's own size.
#pragma once

#include <cstddef>
#include <optional>
#include <unordered_set>
#include <vector>

#include "cache/block_hash.h"

namespace prefixd::cache {

class ChangedKeys {
 public:
  void touched(const Digest& key) {
    if (!on_ || overflow_) return;
    if (keys_.size() >= limit_) {
      overflow_ = true;
      keys_.clear();
      return;
    }
    keys_.insert(key);
  }
  // Every key touched since the last call, or nullopt when the reader must walk the whole store
  // (the first call, or more changes than `limit`). Tracking is on from the first call.
  std::optional<std::vector<Digest>> take(std::size_t limit) {
    limit_ = limit;
    if (!on_ || overflow_) {
      on_ = true;
      overflow_ = false;
      keys_.clear();
      return std::nullopt;
    }
    std::vector<Digest> out(keys_.begin(), keys_.end());
    keys_.clear();
    return out;
  }

 private:
  bool on_ = false;
  bool overflow_ = false;
  std::size_t limit_ = 0;
  std::unordered_set<Digest, DigestHash> keys_;
};

}  // namespace prefixd::cache
