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

#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

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

void DiskStore::for_each_segment(const std::function<void(const RecordMeta&)>& visit) const {
  std::lock_guard lock(mutex_);
  for (const auto& [key, entry] : entries_) {
    if (entry.meta.kind == RecordKind::segment) visit(entry.meta);
  }
}

CacheSummary PrefixCache::Impl::summary(std::optional<std::uint64_t> since) {
  SummaryMemo& memo = summary_memo_;
  const std::int32_t segment_tokens = host_.segment_tokens();

  decltype(memo.entries) entries;
  for (const auto& [id, e] : entries_) {
    const std::pair key{id, e.tokens.size()};
    auto found = memo.entries.find(key);
    entries.emplace(key, found != memo.entries.end() ? std::move(found->second) : hasher_.chain(e.lineage, e.tokens));
  }
  memo.entries = std::move(entries);

  decltype(memo.segments) segments;
  const auto keep_segment = [&](const Digest& key, const Digest& parent, std::span<const Token> tokens) {
    if (segments.contains(key)) return;
    auto found = memo.segments.find(key);
    segments.emplace(key, found != memo.segments.end() ? std::move(found->second)
                                                       : segment_blocks(hasher_, segment_tokens, key, parent, tokens));
  };
  for (const auto& [parent, key] : host_.store().parent_links()) {
    if (const HostSegment* s = host_.store().peek(key)) keep_segment(key, parent, s->token_ids);
  }
  if (disk_) {
    disk_->for_each_segment([&](const RecordMeta& meta) { keep_segment(meta.key, meta.parent, meta.tokens); });
  }
  memo.segments = std::move(segments);

  std::vector<Digest> blocks;
  for (const auto& [key, chain] : memo.entries) blocks.insert(blocks.end(), chain.begin(), chain.end());
  for (const auto& [key, chain] : memo.segments) blocks.insert(blocks.end(), chain.begin(), chain.end());
  std::ranges::sort(blocks);
  blocks.erase(std::ranges::unique(blocks).begin(), blocks.end());
  if (blocks != memo.blocks) {
    memo.blocks = std::move(blocks);
    ++memo.version;
  }

  CacheSummary out;
  out.version = memo.version;
  out.model_key = model_key(engine_.model().fingerprint, engine_.model().runtime_signature);
  if (since == memo.version) {
    out.unchanged = true;
  } else {
    out.blocks = memo.blocks;
  }
  return out;
}

std::vector<Digest> PrefixCache::Impl::chain_of(const RequestKey& key, std::span<const Token> prompt) const {
  // A request without a session under session isolation gets a salt of its own (lineage_of): no
  // order a lease is ever given, so nothing held matches past its shared prefix, as for the
  // request itself.
  return hasher_.chain(lineage_of(key, std::numeric_limits<std::uint64_t>::max()), prompt);
}

CacheSummary PrefixCache::summary(std::optional<std::uint64_t> since) { return impl_->summary(since); }

std::vector<Digest> PrefixCache::chain_of(const RequestKey& key, std::span<const engine::Token> prompt) const {
  return impl_->chain_of(key, prompt);
}

}  // namespace prefixd::cache
