// prefixd cache — KV events: which blocks entered or left each tier, as content addresses, for
// routers that index many servers' caches from what each one announces (vLLM's KV events; the
// wire format is the publisher's, src/events/kv_event_publisher.h).
//
// A block is `block_size` tokens of a prefix, named by its chain hash (block_hash.h): the same
// address /v1/cache/summary lists and the host, disk and shared tiers key their records by. A tier
// holds a block when it holds every position of it, from the namespace root on (device entries)
// or as part of a segment (host and disk). Events are the changes of each tier's set of blocks,
// found by comparing what the tiers hold with what they held at the last look
// (holdings_summary.cpp): announced once when a block's first holder in that tier appears, once
// when its last one goes.
//
// Scoping: every block belongs to the scope (tenant) whose request left it; the cache emits
// events only for scopes the publisher's filter accepts, so a subscriber never learns another
// tenant's prefixes, not even their hashes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cache/block_hash.h"
#include "cache/scope.h"
#include "engine/types.h"

namespace prefixd::cache {

// Where a block is held. The shared tier is not a medium of its own: every server on the same
// store reaches it alike, and the store evicts without telling anyone (see docs/operator-guide.md).
enum class Medium : std::uint8_t { device, host, disk };
inline constexpr int kMediumCount = 3;
const char* medium_name(Medium medium);  // "device", "host", "disk"

// Consecutive blocks of one prefix that entered a tier: `hashes[i]` covers
// tokens[i * block_size, (i + 1) * block_size). `parent`: the chain hash of the block before the
// first one; nullopt when the first block starts the prefix (or hangs off a session's fork).
struct BlocksStored {
  std::vector<Digest> hashes;
  std::optional<Digest> parent;
  std::vector<engine::Token> tokens;
  Medium medium = Medium::device;
  ScopeId scope{};
  // The LoRA adapters its namespace computes under (RequestKey::adapter); empty: none, or not
  // known to this process (a block read from disk before any request under them ran).
  std::string adapter;
};

struct BlocksRemoved {
  std::vector<Digest> hashes;
  Medium medium = Medium::device;
  ScopeId scope{};
};

// Every tier was emptied: a subscriber forgets everything it knows of this server.
struct AllBlocksCleared {};

using KvEvent = std::variant<BlocksStored, BlocksRemoved, AllBlocksCleared>;

// Which scopes' blocks are announced.
using KvEventScopes = std::function<bool(const ScopeId& scope)>;

}  // namespace prefixd::cache
