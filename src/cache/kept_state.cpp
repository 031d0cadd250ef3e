#include "cache/kept_state.h"

namespace prefixd::cache {

KeptState find_kept_state(const DeviceTier& device, const CheckpointStore& checkpoints, const BackingTiers& backing,
                          const Lineage& lineage, const std::string& session, const Reach& reach,
                          std::span<const engine::Token> tokens, std::span<const Digest> chain, std::int32_t limit,
                          bool with_disk) {
  KeptState out;
  limit = std::min(limit, static_cast<std::int32_t>(tokens.size()));
  if (limit <= 0) return out;
  const RadixTree::Match whole = device.match_whole(lineage.ns, tokens.first(static_cast<size_t>(limit)), session, reach);
  if (whole.length > 0 && device.entry(whole.entry).state_at_end) {
    out.entry_end = whole.length;
    out.entry = whole.entry;
  }
  out.memory = checkpoints.find(lineage, tokens, chain, limit);
  if (with_disk) {
    const std::vector<engine::Pos> on_disk = backing.disk_checkpoints(lineage, tokens, chain, out.in_memory(), limit);
    if (!on_disk.empty()) out.disk = on_disk.front();
  }
  return out;
}

}  // namespace prefixd::cache
