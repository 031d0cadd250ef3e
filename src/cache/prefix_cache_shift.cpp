// prefixd cache — reuse by shifting (shifted_reuse.h): the cached sequence that gives a prompt the
// most tokens past its exact prefix — a device entry, kept whole while the exact prefix is adopted,
// or else a chain of host segments — and its chunks moved into the request's sequence.
#include <unordered_map>

#include "cache/prefix_cache_impl.h"
#include "cache/shifted_reuse.h"

namespace prefixd::cache {
namespace {

// At most this many host sequences (root-to-leaf chains of segments) are weighed as donors.
constexpr std::size_t kMaxHostDonors = 64;

// What a donor would give: its exact prefix and the chunks after it.
std::int32_t donor_total(std::span<const engine::Token> cached, std::span<const engine::Token> prompt,
                         std::int32_t min_chunk, std::int32_t limit) {
  const std::int32_t exact = std::min(common_prefix(cached, prompt), limit);
  const std::int32_t shifted = shifted_tokens(find_shift_chunks(cached, prompt, exact, min_chunk, limit));
  return shifted == 0 ? 0 : exact + shifted;
}

}  // namespace

std::int32_t PrefixCache::Impl::shift_min_chunk(const Lease& lease) const {
  if (!family_.shiftable() || !engine_.can_shift()) return 0;
  return lease.key.shift_reuse_min >= 0 ? lease.key.shift_reuse_min : config_.shift_reuse_min;
}

std::optional<ShiftDonor> PrefixCache::Impl::reserve_shift_donor(const Lease& lease) {
  const std::int32_t min_chunk = shift_min_chunk(lease);
  // The one-token guard: the prompt's last token is always computed (its logits are sampled).
  const auto limit = static_cast<std::int32_t>(lease.prompt.size()) - 1;
  if (min_chunk <= 0 || limit <= 0) return std::nullopt;
  // Of the request's own session when session isolation walls other sessions off past their
  // shared prefix.
  const bool others_walled = lease.reach.others != Reach{}.others;
  const DeviceEntry* entry = nullptr;
  std::int32_t best = 0;
  for (const auto& [id, e] : device_.entries()) {
    if (e.lineage.ns != lease.lineage.ns) continue;
    if (others_walled && !(lease.reach.own && e.session == lease.session)) continue;
    const std::int32_t total = donor_total(e.tokens, lease.prompt, min_chunk, limit);
    if (total > best || (total == best && total > 0 && entry != nullptr && e.last_used > entry->last_used)) {
      entry = &e;
      best = total;
    }
  }

  // The host tier's sequences of the namespace, for what the device does not hold (an entry
  // demoted while other requests ran). Segments carry no session: only without a wall.
  std::optional<ShiftDonor> host;
  if (!others_walled && lease.lineage.fork == kNoFork && host_.store().size() > 0) {
    std::unordered_multimap<Digest, Digest, DigestHash> children;
    for (const auto& [parent, key] : host_.store().parent_links()) children.emplace(parent, key);
    // Depth first from the namespace's root; a chain is a candidate where it ends.
    struct Frame {
      Digest key;
      std::size_t depth;  // segments on the path before it
    };
    std::vector<Digest> path;
    std::vector<engine::Token> tokens;
    std::vector<Frame> stack;
    const Digest root = hasher_.root(lease.lineage.ns);
    for (auto [it, end] = children.equal_range(root); it != end; ++it) stack.push_back({it->second, 0});
    std::size_t weighed = 0;
    while (!stack.empty() && weighed < kMaxHostDonors) {
      const Frame frame = stack.back();
      stack.pop_back();
      const HostSegment* segment = host_.store().peek(frame.key);
      if (segment == nullptr) continue;
      path.resize(frame.depth);
      std::size_t held = 0;
      for (const Digest& k : path) held += host_.store().peek(k)->token_ids.size();
      if (static_cast<std::size_t>(segment->begin) != held) continue;  // not a chain from position 0
      path.push_back(frame.key);
      tokens.resize(held);
      tokens.insert(tokens.end(), segment->token_ids.begin(), segment->token_ids.end());
      const auto [first, last] = children.equal_range(frame.key);
      if (first != last) {
        for (auto it = first; it != last; ++it) stack.push_back({it->second, frame.depth + 1});
        continue;
      }
      ++weighed;
      const std::int32_t total = donor_total(tokens, lease.prompt, min_chunk, limit);
      if (total > best) {
        best = total;
        host = ShiftDonor{.host_path = path, .tokens = tokens};
      }
    }
  }
  if (host) {
    for (const Digest& key : host->host_path) host_.store().touch(key);  // last to go while the prefix is adopted
    return host;
  }
  if (entry == nullptr || best == 0) return std::nullopt;
  // Locked, its cells stay while the exact prefix is adopted and room is made for the request.
  device_.lock(entry->lineage.ns, entry->tokens, static_cast<std::int32_t>(entry->tokens.size()));
  return ShiftDonor{.entry = entry->id, .tokens = entry->tokens};
}

bool PrefixCache::Impl::move_chunk(const ShiftDonor& donor, const ShiftChunk& c, engine::SeqId seq) {
  const engine::SeqId scratch = device_.scratch();
  const engine::Pos delta = c.to - c.from;
  // Cells of the scratch sequence alone, at the chunk's positions, are moved and handed over:
  // moving a shared cell would move it for every entry that shares it.
  const auto hand_over = [&](engine::Pos from, engine::Pos stop) {
    const bool moved = engine_.shift_sequence(scratch, from, stop, delta);
    if (moved) engine_.copy_sequence(scratch, seq, from + delta, stop + delta);
    engine_.remove_sequence(scratch, 0, -1);
    return moved;
  };
  if (donor.entry) {
    const DeviceEntry* entry = device_.find(*donor.entry);
    if (entry == nullptr) return false;
    engine_.copy_sequence(entry->holder, scratch, c.from, c.from + c.length);
    const engine::Bytes state = engine_.save_sequence(scratch);
    engine_.remove_sequence(scratch, 0, -1);
    if (!engine_.restore_sequence(state, scratch)) return false;
    return hand_over(c.from, c.from + c.length);
  }
  // From the host tier: each segment the chunk overlaps, restored into the scratch sequence.
  engine::Pos begin = 0;
  for (const Digest& key : donor.host_path) {
    const HostSegment* segment = host_.store().peek(key);
    if (segment == nullptr) return false;
    const engine::Pos end = begin + segment->tokens;
    const engine::Pos from = std::max(begin, c.from);
    const engine::Pos stop = std::min(end, c.from + c.length);
    if (from < stop) {
      if (!engine_.restore_sequence(segment->state, scratch)) {
        engine_.remove_sequence(scratch, 0, -1);
        return false;
      }
      engine_.remove_sequence(scratch, 0, from);
      engine_.remove_sequence(scratch, stop, -1);
      if (!hand_over(from, stop)) return false;
    }
    begin = end;
  }
  return true;
}

Acquisition PrefixCache::Impl::shift_into(Lease& lease, Acquisition got, std::optional<ShiftDonor> donor) {
  if (!donor) return got;
  const auto release = [&] {
    if (donor->entry) device_.unlock(lease.lineage.ns, donor->tokens, static_cast<std::int32_t>(donor->tokens.size()));
    budget_.enforce_running();  // what the request does not use goes as the budget says
  };
  const auto limit = static_cast<std::int32_t>(lease.prompt.size()) - 1;
  if (got.waiting || got.reused >= limit || common_prefix(donor->tokens, lease.prompt) < got.reused) {
    release();
    return got;
  }
  const std::vector<ShiftChunk> chunks =
      find_shift_chunks(donor->tokens, lease.prompt, got.reused, shift_min_chunk(lease), limit);
  std::int32_t shifted = 0;
  for (const ShiftChunk& c : chunks) {
    if (!move_chunk(*donor, c, lease.seq)) break;  // no room for a copy, or a segment left: the rest is computed
    shifted += c.length;
  }
  release();
  if (shifted == 0) return got;
  trace("shift seq={}: {} tokens in {} chunks from {} past {}", lease.seq, shifted, chunks.size(),
        donor->entry ? "a device entry" : "host segments", got.reused);
  got.reused += shifted;
  got.shifted += shifted;
  if (got.outcome == Outcome::cold) got.outcome = Outcome::partial;
  if (got.tier == Tier::none) got.tier = donor->entry ? Tier::device : Tier::host;
  lease.computed = got.reused;
  return got;
}

}  // namespace prefixd::cache
