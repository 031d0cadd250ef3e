// prefixd cache — reuse by shifting (shifted_reuse.h): the device entry that gives a prompt the
// most tokens past its exact prefix, kept whole while the exact prefix is adopted, and its chunks
// moved into the request's sequence.
#include "cache/prefix_cache_impl.h"
#include "cache/shifted_reuse.h"

namespace prefixd::cache {

std::int32_t PrefixCache::Impl::shift_min_chunk(const Lease& lease) const {
  if (!family_.shiftable() || !engine_.can_shift()) return 0;
  return lease.key.shift_reuse_min >= 0 ? lease.key.shift_reuse_min : config_.shift_reuse_min;
}

std::optional<EntryId> PrefixCache::Impl::reserve_shift_donor(const Lease& lease) {
  const std::int32_t min_chunk = shift_min_chunk(lease);
  // The one-token guard: the prompt's last token is always computed (its logits are sampled).
  const auto limit = static_cast<std::int32_t>(lease.prompt.size()) - 1;
  if (min_chunk <= 0 || limit <= 0) return std::nullopt;
  // An entry of the namespace, of the request's own session when session isolation walls other
  // sessions off past their shared prefix; the one that would give the most tokens in all, its
  // exact prefix and the chunks after it.
  const DeviceEntry* donor = nullptr;
  std::int32_t best = 0;
  for (const auto& [id, e] : device_.entries()) {
    if (e.lineage.ns != lease.lineage.ns) continue;
    const bool others_walled = lease.reach.others != Reach{}.others;
    if (others_walled && !(lease.reach.own && e.session == lease.session)) continue;
    const std::int32_t exact = std::min(common_prefix(e.tokens, lease.prompt), limit);
    const std::int32_t shifted = shifted_tokens(find_shift_chunks(e.tokens, lease.prompt, exact, min_chunk, limit));
    if (shifted == 0) continue;
    const std::int32_t total = exact + shifted;
    if (total > best || (total == best && donor != nullptr && e.last_used > donor->last_used)) {
      donor = &e;
      best = total;
    }
  }
  if (donor == nullptr) return std::nullopt;
  // Locked, its cells stay while the exact prefix is adopted and room is made for the request.
  device_.lock(donor->lineage.ns, donor->tokens, static_cast<std::int32_t>(donor->tokens.size()));
  return donor->id;
}

Acquisition PrefixCache::Impl::shift_into(Lease& lease, Acquisition got, std::optional<EntryId> reserved) {
  if (!reserved) return got;
  const DeviceEntry* donor = device_.find(*reserved);
  if (donor == nullptr) return got;
  const std::vector<engine::Token> donor_tokens = donor->tokens;
  const engine::SeqId holder = donor->holder;
  const EntryId donor_id = donor->id;
  const auto release = [&] {
    device_.unlock(lease.lineage.ns, donor_tokens, static_cast<std::int32_t>(donor_tokens.size()));
    budget_.enforce_running();  // what the request does not use goes as the budget says
  };
  const auto limit = static_cast<std::int32_t>(lease.prompt.size()) - 1;
  if (got.waiting || got.reused >= limit || common_prefix(donor_tokens, lease.prompt) < got.reused) {
    release();
    return got;
  }
  const std::vector<ShiftChunk> chunks =
      find_shift_chunks(donor_tokens, lease.prompt, got.reused, shift_min_chunk(lease), limit);

  // Each chunk is copied out of the donor's (shared) cells into cells of the scratch sequence
  // alone, moved there, and handed to the request: moving a shared cell would move it for the
  // donor and every entry that shares it.
  const engine::SeqId scratch = device_.scratch();
  std::int32_t shifted = 0;
  for (const ShiftChunk& c : chunks) {
    engine_.copy_sequence(holder, scratch, c.from, c.from + c.length);
    const engine::Bytes state = engine_.save_sequence(scratch);
    engine_.remove_sequence(scratch, 0, -1);
    const bool moved = engine_.restore_sequence(state, scratch) &&
                       engine_.shift_sequence(scratch, c.from, c.from + c.length, c.to - c.from);
    if (moved) engine_.copy_sequence(scratch, lease.seq, c.to, c.to + c.length);
    engine_.remove_sequence(scratch, 0, -1);
    if (!moved) break;  // no room for a copy: the rest of the prompt is computed
    shifted += c.length;
  }
  release();
  if (shifted == 0) return got;
  trace("shift seq={}: {} tokens in {} chunks from entry {} past {}", lease.seq, shifted, chunks.size(), donor_id,
        got.reused);
  got.reused += shifted;
  got.shifted += shifted;
  if (got.outcome == Outcome::cold) got.outcome = Outcome::partial;
  if (got.tier == Tier::none) got.tier = Tier::device;
  lease.computed = got.reused;
  return got;
}

}  // namespace prefixd::cache
