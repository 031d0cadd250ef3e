#include "cache/host_tier.h"

#include <algorithm>
#include <spdlog/spdlog.h>

#include "cache/cell_pin.h"
#include "cache/path_walk.h"

namespace prefixd::cache {

using engine::Token;

HostTier::HostTier(engine::Engine& engine, const BlockHasher& hasher, std::int32_t segment_tokens,
                   std::uint64_t capacity_bytes, std::int64_t max_segments, engine::SeqId scratch)
    : engine_(engine), hasher_(hasher),
      segment_tokens_(std::max(1, segment_tokens / hasher.block_size()) * hasher.block_size()),
      scratch_(scratch), store_(capacity_bytes, max_segments) {}

HostTier::Plan HostTier::plan(const Lineage& lineage, std::span<const Token> query, std::int32_t on_device) const {
  if (store_.size() == 0) return {};
  const WalkTiers tiers{.device = on_device, .host = &store_, .after_device_part = true};
  return as_host_plan(*this, hasher_, walk_path(*this, hasher_, tiers, lineage, query));
}

HostTier::Plan HostTier::clip(const Plan& plan, std::int32_t length) const {
  Plan out = plan;
  if (length >= plan.length) return out;
  out.keys.clear();
  out.length = length;
  out.last_take = 0;
  std::int32_t held = plan.start;
  for (size_t i = 0; i < plan.keys.size() && held < length; ++i) {
    const HostSegment* segment = store_.peek(plan.keys[i]);
    if (segment == nullptr) break;
    const std::int32_t take = i + 1 == plan.keys.size() ? plan.last_take : segment->tokens;
    out.keys.push_back(plan.keys[i]);
    out.last_take = std::min(take, length - held);
    held += out.last_take;
  }
  return out;
}

std::int32_t HostTier::restore(const Plan& plan, engine::SeqId dst, std::int32_t from, std::int64_t& failed,
                              engine::SeqId keep_with) {
  // Deepest first, so the root segment ends up the most recently used (the stored segments of the
  // part the device tier gives are in use too).
  for (auto key = plan.keys.rbegin(); key != plan.keys.rend(); ++key) store_.touch(*key);
  for (const Digest& key : plan.ancestors) store_.touch(key);
  std::int32_t held = plan.start;
  for (size_t i = 0; i < plan.keys.size(); ++i) {
    const Digest& key = plan.keys[i];
    const HostSegment* segment = store_.peek(key);
    if (segment == nullptr || segment->begin != held) break;
    const std::int32_t take = i + 1 == plan.keys.size() ? plan.last_take : segment->tokens;
    if (held + take <= from) {  // the device tier already gave these positions
      held += take;
      continue;
    }
    if (!engine_.restore_sequence(segment->state, scratch_)) {
      failed += 1;
      spdlog::warn("cache: host segment at position {} could not be restored; dropped", held);
      store_.erase(key);
      engine_.remove_sequence(scratch_, 0, -1);
      break;
    }
    engine_.copy_sequence(scratch_, dst, std::max(held, from), held + take);
    pin_cells(engine_, keep_with, scratch_, std::max(held, from), held + take);
    engine_.remove_sequence(scratch_, 0, -1);
    held += take;
  }
  return std::max(held, from);
}

void HostTier::drop_covered_siblings(const Digest& key, const Digest& parent, std::span<const Token> tokens) {
  // A sibling whose tokens are a prefix of the new segment's — the tail an earlier turn of the same
  // conversation left — is covered by it: a lookup compares tokens, so it finds every prefix of
  // the new segment there. (Only tails can be shorter; nothing hangs off a tail.)
  // So is a tail whose prompt the new segment covers but whose reply it does not continue: the
  // conversation went on with other text in the assistant's place (a client that rewrites or
  // trims replies, or a reply regenerated), so that reply's K/V serves no one, and kept it would
  // crowd out the conversations that come back — one stale tail per turn.
  for (const Digest& sibling : store_.children(parent, tokens.front())) {
    const HostSegment* other = store_.peek(sibling);
    if (sibling == key || other == nullptr) continue;
    const std::span<const Token> theirs = other->token_ids;
    if (theirs.size() < tokens.size() && std::ranges::equal(theirs, tokens.first(theirs.size()))) {
      store_.erase(sibling);
      continue;
    }
    const auto prompt = static_cast<std::size_t>(other->prompt_tokens);
    const bool tail = theirs.size() < static_cast<std::size_t>(segment_tokens_);
    if (tail && other->prompt_tokens >= 0 && prompt < theirs.size() && prompt <= tokens.size() &&
        std::ranges::equal(theirs.first(prompt), tokens.first(prompt))) {
      store_.erase(sibling);
    }
  }
}

std::vector<HostTier::Cut> HostTier::cuts(const Lineage& lineage, std::span<const Token> tokens, std::int32_t from) const {
  return cuts(lineage, tokens, hasher_.chain(lineage, tokens), from);
}

std::vector<HostTier::Cut> HostTier::cuts(const Lineage& lineage, std::span<const Token> tokens,
                                          std::span<const Digest> blocks, std::int32_t from) const {
  std::vector<Cut> out;
  const auto n = static_cast<std::int32_t>(tokens.size());
  const std::int32_t block = hasher_.block_size();
  for (std::int32_t begin = std::max(0, from) / segment_tokens_ * segment_tokens_; begin < n; begin += segment_tokens_) {
    const std::int32_t stop = std::min(begin + segment_tokens_, n);
    const Digest parent = hasher_.parent(lineage, blocks, begin, stop);
    const auto part = tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(stop - begin));
    // A whole grid segment is named by the chain; a tail (a partial last block included) by its
    // parent and its own tokens.
    const Digest key = stop - begin == segment_tokens_ ? blocks[static_cast<size_t>(stop / block) - 1]
                                                       : hasher_.next(parent, part);
    out.push_back(Cut{begin, stop, parent, key});
  }
  return out;
}

std::optional<HostTier::Cut> HostTier::wall_cut(const Lineage& lineage, std::span<const Token> tokens) const {
  const auto n = static_cast<std::int32_t>(tokens.size());
  if (lineage.fork <= 0 || lineage.fork >= n || lineage.fork % segment_tokens_ == 0) return std::nullopt;
  const std::int32_t begin = lineage.fork / segment_tokens_ * segment_tokens_;
  const std::vector<Digest> blocks = hasher_.chain(lineage, tokens.first(static_cast<size_t>(begin)));
  // [begin, fork) does not cover the fork: its parent is the namespace's.
  const Digest parent = hasher_.parent(lineage, blocks, begin, lineage.fork);
  const auto part = tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(lineage.fork - begin));
  return Cut{begin, lineage.fork, parent, hasher_.next(parent, part)};
}

engine::Bytes HostTier::serialize(engine::SeqId holder, engine::Pos begin, engine::Pos stop) {
  engine_.copy_sequence(holder, scratch_, begin, stop);
  engine_.drop_checkpoint_state(scratch_);
  engine::Bytes state = engine_.save_sequence(scratch_);
  engine_.remove_sequence(scratch_, 0, -1);
  return state;
}

bool HostTier::adopt(const Digest& key, HostSegment segment, HostStore::Evicted& evicted, std::span<const Digest> keep) {
  if (store_.contains(key)) return true;
  const Digest parent = segment.parent;
  const std::vector<Token> tokens = segment.token_ids;
  if (!store_.insert(key, std::move(segment), evicted, keep)) return false;
  drop_covered_siblings(key, parent, tokens);
  return true;
}

bool HostTier::save(const Lineage& lineage, std::span<const Token> tokens, std::int32_t from, engine::SeqId holder,
                    HostStore::Evicted& evicted, const ScopeId& scope, std::int32_t prompt_length) {
  if (store_.capacity() == 0 || tokens.empty()) return false;
  std::vector<Digest> stored;  // in position order
  // Storing never evicts the prefix the new segment extends: it would be useless without it.
  auto store = [&](const Cut& cut) {
    if (store_.contains(cut.key)) return true;
    const auto part = tokens.subspan(static_cast<size_t>(cut.begin), static_cast<size_t>(cut.stop - cut.begin));
    HostSegment segment{cut.begin, cut.stop - cut.begin, cut.parent, {part.begin(), part.end()},
                        serialize(holder, cut.begin, cut.stop), {}, scope};
    if (prompt_length >= 0) segment.prompt_tokens = std::clamp(prompt_length - cut.begin, 0, cut.stop - cut.begin);
    if (segment.state.empty() || !store_.insert(cut.key, std::move(segment), evicted, stored)) return false;
    drop_covered_siblings(cut.key, cut.parent, part);
    return true;
  };
  const std::int32_t first = from / segment_tokens_ * segment_tokens_;
  std::int32_t reached = first;
  for (const Cut& cut : cuts(lineage, tokens, from)) {
    if (!store(cut)) break;
    stored.push_back(cut.key);
    reached = cut.stop;
  }
  // The wall segment, when its prefix is stored or stays on the device; in LRU order it sits with
  // the segment it shares its start with (older than its parent, like that one).
  if (const std::optional<Cut> wall = wall_cut(lineage, tokens); wall && wall->begin >= first && wall->begin <= reached) {
    if (store(*wall)) {
      const auto at = std::ranges::find_if(stored, [&](const Digest& key) {
        const HostSegment* s = store_.peek(key);
        return s != nullptr && s->begin >= wall->begin;
      });
      stored.insert(at, wall->key);
    }
  }
  for (auto key = stored.rbegin(); key != stored.rend(); ++key) store_.touch(*key);
  const std::vector<Digest> blocks = hasher_.chain(lineage, tokens.first(static_cast<size_t>(first)));
  const auto per = static_cast<size_t>(segment_tokens_ / hasher_.block_size());
  for (size_t end = blocks.size(); end >= per; end -= per) {
    store_.touch(blocks[end - 1]);  // ancestors before `from`: the root ends newest
  }
  return !stored.empty();
}

}  // namespace prefixd::cache
