// prefixd cache — the holdings summary: which prefixes this cache keeps, as block chain hashes, for
// a router that sends a request to the server already holding the longest part of its prompt
// (how the hashes are found, and memoized, is described in holdings_summary.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/backing_tiers.h"
#include "cache/device_tier.h"
#include "cache/host_tier.h"

namespace prefixd::cache {

class HoldingsSummary {
 public:
  HoldingsSummary(const BlockHasher& hasher, const DeviceTier& device, HostTier& host, const BackingTiers& backing);
  // With `since` equal to the current version only the version comes back (unchanged).
  CacheSummary summary(std::optional<std::uint64_t> since);

 private:
  const BlockHasher& hasher_;
  const DeviceTier& device_;
  HostTier& host_;
  const BackingTiers& backing_;
  // Block chains per segment key and per device entry, how many of them list each block (the set
  // is the keys), and the set's version.
  struct Memo {
    std::unordered_map<Digest, std::vector<Digest>, DigestHash> segments;
    std::map<std::pair<EntryId, std::size_t>, std::vector<Digest>> entries;
    std::unordered_map<Digest, std::int64_t, DigestHash> blocks;
    std::uint64_t version = 0;
  };
  Memo memo_;
};

}  // namespace prefixd::cache
