// prefixd cache — the holdings summary: which prefixes this cache keeps, as block chain hashes, for
// a router that sends a request to the server already holding the longest part of its prompt.
//
// Addresses are BlockHasher::chain(lineage, tokens), the same on every server that loads the same
// model. A device entry knows its lineage and tokens, so its chain is computed whole. A host or
// disk segment knows its parent (the chain hash at its begin, which lies on a block boundary) and
// its tokens, so the hashes of its whole blocks are next(parent, block) iterated. One exception:
// under session isolation, the segment that covers a session's fork hangs off a forked parent,
// while the chain forks only at the block covering the fork; for such a segment (recognised when a
// whole grid segment's iterated end differs from its key, which is the chain hash at its end) only
// its key is listed. A tail segment that covers a fork cannot be recognised; its iterated hashes
// name nothing any chain reaches, so they cost a few bytes and never a wrong route.
//
// Segments never change, so their hashes are memoized by key; device entries change only by being
// cut back, so theirs are memoized by (entry, length). Memo entries of what left the tiers are
// dropped on the next call.
#include <algorithm>

#include "cache/holdings_summary.h"

namespace prefixd::cache {

using engine::Token;

namespace {

// The hashes of the whole blocks of a segment starting at `parent`; only `key` when the segment
// is a whole grid segment whose chain forked inside it (see the header comment).
std::vector<Digest> segment_blocks(const BlockHasher& hasher, std::int32_t segment_tokens, const Digest& key,
                                   const Digest& parent, std::span<const Token> tokens) {
  std::vector<Digest> out;
  const auto block = static_cast<std::size_t>(hasher.block_size());
  Digest h = parent;
  for (std::size_t at = 0; at + block <= tokens.size(); at += block) {
    h = hasher.next(h, tokens.subspan(at, block));
    out.push_back(h);
  }
  if (static_cast<std::int32_t>(tokens.size()) == segment_tokens && !out.empty() && out.back() != key) return {key};
  return out;
}

}  // namespace

HoldingsSummary::HoldingsSummary(const BlockHasher& hasher, const DeviceTier& device, HostTier& host,
                                 const BackingTiers& backing)
    : hasher_(hasher), device_(device), host_(host), backing_(backing) {}

CacheSummary HoldingsSummary::summary(std::optional<std::uint64_t> since) {
  Memo& memo = memo_;
  const std::int32_t segment_tokens = host_.segment_tokens();
  // The set changes only when a block's count goes from 0 to 1 or back; nothing is sorted here
  // (the engine thread waits for this call): a caller that wants order sorts its copy.
  bool changed = false;
  const auto count = [&](const std::vector<Digest>& chain, std::int64_t delta) {
    for (const Digest& block : chain) {
      auto [it, inserted] = memo.blocks.try_emplace(block, 0);
      it->second += delta;
      if (inserted || it->second == 0) changed = true;  // a block appeared or went
      if (it->second == 0) memo.blocks.erase(it);
    }
  };

  decltype(memo.entries) entries;
  for (const auto& [id, e] : device_.entries()) {
    const std::pair key{id, e.tokens.size()};
    if (auto found = memo.entries.find(key); found != memo.entries.end()) {
      entries.emplace(key, std::move(found->second));
      memo.entries.erase(found);
    } else {
      count(entries.emplace(key, hasher_.chain(e.lineage, e.tokens)).first->second, +1);
    }
  }

  decltype(memo.segments) segments;
  const auto keep_segment = [&](const Digest& key, const Digest& parent, std::span<const Token> tokens) {
    if (segments.contains(key)) return;  // in both the host and the disk tier
    if (auto found = memo.segments.find(key); found != memo.segments.end()) {
      segments.emplace(key, std::move(found->second));
      memo.segments.erase(found);
    } else {
      count(segments.emplace(key, segment_blocks(hasher_, segment_tokens, key, parent, tokens)).first->second, +1);
    }
  };
  for (const auto& [parent, key] : host_.store().parent_links()) {
    if (const HostSegment* s = host_.store().peek(key)) keep_segment(key, parent, s->token_ids);
  }
  if (backing_.disk() != nullptr) {
    backing_.disk()->for_each_segment([&](const RecordMeta& meta) { keep_segment(meta.key, meta.parent, meta.tokens); });
  }
  // Removals last, so a prefix that moved between tiers since the last call is no change.
  for (const auto& [key, chain] : memo.entries) count(chain, -1);   // entries gone or cut back
  for (const auto& [key, chain] : memo.segments) count(chain, -1);  // segments gone from both tiers
  memo.entries = std::move(entries);
  memo.segments = std::move(segments);
  if (changed) ++memo.version;

  CacheSummary out;
  out.version = memo.version;
  out.model_key = backing_.model_key();
  if (since == memo.version) {
    out.unchanged = true;
  } else {
    out.blocks.reserve(memo.blocks.size());
    for (const auto& [block, n] : memo.blocks) out.blocks.push_back(block);
  }
  return out;
}

}  // namespace prefixd::cache
