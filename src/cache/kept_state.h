// prefixd cache — checkpoint families: where the state after a prefix of a prompt is kept, the
// one lookup what a key holds (KeyPaths::held, build_artifact) and the saved-state source's offer
// (Checkpoints::offer) both ask. A state is kept at a device entry's exact end (its holder keeps
// the state after its last token), in the checkpoint store, or on disk. Reads indexes only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "cache/backing_tiers.h"
#include "cache/checkpoint_store.h"
#include "cache/device_tier.h"

namespace prefixd::cache {

struct KeptState {
  std::int32_t entry_end = 0;  // a device entry wholly within the prefix, its state at its end
  EntryId entry = 0;
  CheckpointStore::Found memory;
  std::int32_t disk = 0;       // a higher position whose checkpoint only the disk holds (0: none)
  std::int32_t best() const { return std::max({entry_end, memory.position, disk}); }
  std::int32_t checkpoint() const { return std::max(memory.position, disk); }
  std::int32_t in_memory() const { return std::max(entry_end, memory.position); }
};

// The states kept after prefixes of `tokens` no longer than `limit`, for a request of `session`
// that may reuse `reach`; the disk's only `with_disk`. `chain`: `tokens`' chain in `lineage`.
KeptState find_kept_state(const DeviceTier& device, const CheckpointStore& checkpoints, const BackingTiers& backing,
                          const Lineage& lineage, const std::string& session, const Reach& reach,
                          std::span<const engine::Token> tokens, std::span<const Digest> chain, std::int32_t limit,
                          bool with_disk);

}  // namespace prefixd::cache
