// prefixd cache — reuse by shifting (shifted_reuse.h): the cached sequence that gives a prompt the
// most tokens past its exact prefix — a device entry, kept whole while the exact prefix is adopted,
// or else a chain of host segments, or of disk files restored into the host tier first — and its
// chunks moved into the request's sequence.
#include <functional>
#include <span>
#include <unordered_map>

#include "cache/cell_pin.h"
#include "cache/prefix_cache_impl.h"
#include "cache/shifted_reuse.h"

namespace prefixd::cache {
namespace {

// At most this many sequences (root-to-leaf chains of segments) of each tier are weighed as donors.
constexpr std::size_t kMaxChainDonors = 64;

// What a donor would give: its exact prefix and the chunks after it.
std::int32_t donor_total(std::span<const engine::Token> cached, std::span<const engine::Token> prompt,
                         std::int32_t min_chunk, std::int32_t limit) {
  const std::int32_t exact = std::min(common_prefix(cached, prompt), limit);
  const std::int32_t shifted = shifted_tokens(find_shift_chunks(cached, prompt, exact, min_chunk, limit));
  return shifted == 0 ? 0 : exact + shifted;
}

// A tier's segments as chains: each segment names its parent (the namespace's root at position 0).
// A segment's tokens are valid until the next call of `segment`.
struct SegmentChains {
  struct Segment {
    engine::Pos begin = 0;
    std::span<const engine::Token> tokens;
  };
  std::function<std::vector<Digest>(const Digest&)> children;
  std::function<std::optional<Segment>(const Digest&)> segment;
};

struct ChainDonor {
  std::vector<Digest> path;  // from position 0, in position order
  std::vector<engine::Token> tokens;
  std::int32_t total = 0;
};

// Depth first from `root`: of the first kMaxChainDonors whole chains (a chain is a candidate where
// it ends), the one that gives `prompt` more than `floor`, the most; nullopt when none does.
std::optional<ChainDonor> best_chain(const SegmentChains& chains, const Digest& root,
                                     std::span<const engine::Token> prompt, std::int32_t min_chunk,
                                     std::int32_t limit, std::int32_t floor) {
  struct Frame {
    Digest key;
    std::size_t depth;  // segments on the path before it
  };
  std::vector<Frame> stack;
  for (const Digest& child : chains.children(root)) stack.push_back({child, 0});
  std::vector<Digest> path;
  std::vector<std::size_t> ends;  // tokens held once path[i] is added
  std::vector<engine::Token> tokens;
  std::optional<ChainDonor> best;
  std::size_t weighed = 0;
  while (!stack.empty() && weighed < kMaxChainDonors) {
    const Frame frame = stack.back();
    stack.pop_back();
    std::optional<SegmentChains::Segment> segment = chains.segment(frame.key);
    if (!segment) continue;
    path.resize(frame.depth);
    ends.resize(frame.depth);
    const std::size_t held = ends.empty() ? 0 : ends.back();
    if (static_cast<std::size_t>(segment->begin) != held) continue;  // not a chain from position 0
    tokens.resize(held);
    tokens.insert(tokens.end(), segment->tokens.begin(), segment->tokens.end());
    path.push_back(frame.key);
    ends.push_back(tokens.size());
    const std::vector<Digest> children = chains.children(frame.key);
    if (!children.empty()) {
      for (const Digest& child : children) stack.push_back({child, frame.depth + 1});
      continue;
    }
    ++weighed;
    if (const std::int32_t total = donor_total(tokens, prompt, min_chunk, limit); total > floor) {
      floor = total;
      best = ChainDonor{.path = path, .tokens = tokens, .total = total};
    }
  }
  return best;
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
  // demoted while other requests ran), then the disk's (what a restart or the host's cap let go),
  // each only where it gives more than the tiers above. Segments carry no session: only without
  // a wall.
  std::optional<ChainDonor> host;
  std::optional<ChainDonor> disk;
  if (!others_walled && lease.lineage.fork == kNoFork) {
    const Digest root = hasher_.root(lease.lineage.ns);
    if (host_.store().size() > 0) {
      std::unordered_multimap<Digest, Digest, DigestHash> links;
      for (const auto& [parent, key] : host_.store().parent_links()) links.emplace(parent, key);
      const SegmentChains chains{
          .children =
              [&](const Digest& parent) {
                std::vector<Digest> out;
                for (auto [it, end] = links.equal_range(parent); it != end; ++it) out.push_back(it->second);
                return out;
              },
          .segment = [&](const Digest& key) -> std::optional<SegmentChains::Segment> {
            const HostSegment* segment = host_.store().peek(key);
            if (segment == nullptr) return std::nullopt;
            return SegmentChains::Segment{.begin = segment->begin, .tokens = std::span(segment->token_ids)};
          }};
      host = best_chain(chains, root, lease.prompt, min_chunk, limit, best);
      if (host) best = host->total;
    }
    if (const DiskStore* store = backing_.disk(); store != nullptr) {
      std::optional<RecordMeta> meta;  // the index entry last read: what a Segment's tokens view
      const SegmentChains chains{
          .children = [&](const Digest& parent) { return store->children(parent); },
          .segment = [&](const Digest& key) -> std::optional<SegmentChains::Segment> {
            meta = store->meta(key);
            if (!meta || meta->kind != RecordKind::segment) return std::nullopt;
            return SegmentChains::Segment{.begin = meta->begin, .tokens = std::span(meta->tokens)};
          }};
      disk = best_chain(chains, root, lease.prompt, min_chunk, limit, best);
    }
  }
  // A disk donor is restored into the host tier first (read, verified, adopted, as any restore
  // from disk), then gives its chunks from there; what did not read back is not offered.
  bool from_disk = false;
  if (disk) {
    HostStore::Evicted evicted;
    const BackingTiers::RestorePlan plan = backing_.plan_restore(lease.lineage, disk->tokens, 0, true);
    const HostTier::Plan promoted = backing_.promote(lease.lineage, disk->tokens, 0, plan.host, plan.disk, evicted);
    counters_.count_evictions(evicted);
    if (promoted.start == 0 && promoted.length > 0) {
      std::vector<engine::Token> tokens(disk->tokens.begin(), disk->tokens.begin() + promoted.length);
      if (donor_total(tokens, lease.prompt, min_chunk, limit) > 0) {
        host = ChainDonor{.path = promoted.keys, .tokens = std::move(tokens)};
        from_disk = true;
      }
    }
  }
  if (host) {
    // The last to go while the prefix is adopted; leaf first, so that no segment is more recently
    // used than its parent (the store evicts leaves before the prefixes they extend).
    for (auto key = host->path.rbegin(); key != host->path.rend(); ++key) host_.store().touch(*key);
    return ShiftDonor{.host_path = std::move(host->path), .tokens = std::move(host->tokens), .from_disk = from_disk};
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
  // With the full window cache the handed-over cells are pinned at once (cell_pin.h): restoring
  // the chunk's next segment could otherwise take over one of them, lying behind the request's
  // window and owned by it alone, and libllama would drop every cell of the request below it.
  const auto hand_over = [&](engine::Pos from, engine::Pos stop) {
    const bool moved = engine_.shift_sequence(scratch, from, stop, delta);
    if (moved) {
      engine_.copy_sequence(scratch, seq, from + delta, stop + delta);
      pin_cells(engine_, pin_, seq, from + delta, stop + delta);
    }
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
    if (!move_chunk(*donor, c, lease.seq)) {
      // No room for a copy, or a segment left: the rest is computed, and what the chunk handed
      // over before it stopped (its first segments) goes.
      engine_.remove_sequence(lease.seq, c.to, -1);
      trace("shift seq={}: the chunk of {} tokens to {} could not be moved; the rest is computed", lease.seq, c.length, c.to);
      break;
    }
    shifted += c.length;
  }
  release();
  if (shifted == 0) return got;
  trace("shift seq={}: {} tokens in {} chunks from {} past {}", lease.seq, shifted, chunks.size(),
        donor->entry ? "a device entry" : donor->from_disk ? "disk files" : "host segments", got.reused);
  got.reused += shifted;
  got.shifted += shifted;
  if (got.outcome == Outcome::cold) got.outcome = Outcome::partial;
  if (got.tier == Tier::none) got.tier = donor->entry ? Tier::device : donor->from_disk ? Tier::disk : Tier::host;
  lease.computed = got.reused;
  return got;
}

}  // namespace prefixd::cache
