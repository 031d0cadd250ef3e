// prefixd cache — the holdings ledger: which blocks each tier keeps, and how that changes.
//
// Addresses are BlockHasher::chain(lineage, tokens), the same on every server that loads the same
// model. A device entry knows its lineage and tokens, so its chain is computed whole. A host or
// disk segment knows its parent (the chain hash at its begin, which lies on a block boundary) and
// its tokens, so the hashes of its whole blocks are next(parent, block) iterated. One exception:
// under session isolation, the segment that covers a session's fork hangs off a forked parent,
// while the chain forks only at the block covering the fork; for such a segment (recognised when a
// whole grid segment's iterated end differs from its key, which is the chain hash at its end) only
// its key is listed, as its last block. A tail segment that covers a fork cannot be recognised;
// its iterated hashes name nothing any chain reaches, so they cost a few bytes and never a wrong
// route.
//
// Segments never change, so their hashes are memoized by key; device entries change only by being
// cut back, so theirs are memoized by (entry, length). Each refresh compares the tiers with the
// memo: device entries (one per holder sequence) by a walk of them all; host and disk segments,
// which may number in the hundreds of thousands, by the keys each store inserted or removed since
// the last refresh (ChangedKeys), or by a whole walk the first time and after more changes than a
// store keeps. A holder found in the memo is carried over, a new one is counted in (its blocks
// whose count in its tier goes from 0 to 1 are stored events), one that left is counted out
// (blocks whose count drops to 0 are removed events). Removals come last, so a prefix that moved
// between holders of one tier, or between tiers, is no change to the union, and a block is never
// both stored and removed in one tier by one refresh.
#include <algorithm>
#include <unordered_set>
#include <utility>

#include "cache/holdings_summary.h"

namespace prefixd::cache {

using engine::Token;

const char* medium_name(Medium medium) {
  switch (medium) {
    case Medium::device: return "device";
    case Medium::host: return "host";
    case Medium::disk: return "disk";
  }
  return "";
}

HoldingsSummary::HoldingsSummary(const BlockHasher& hasher, const DeviceTier& device, HostTier& host,
                                 const BackingTiers& backing)
    : hasher_(hasher),
      device_(device),
      host_(host),
      backing_(backing),
      labels_(backing.disk() != nullptr ? backing.disk()->dir() / "labels" : std::filesystem::path()) {}

void HoldingsSummary::count_in(Medium medium, const Held& held, const Seen& seen) {
  const bool record = recorded(held.scope);
  const auto block = static_cast<std::size_t>(hasher_.block_size());
  BlocksStored run;  // consecutive blocks new to the tier; open while it has hashes
  const auto close_run = [&] {
    if (!run.hashes.empty()) events_.emplace_back(std::exchange(run, BlocksStored{}));
  };
  Counts& counts = in_medium_[static_cast<int>(medium)];
  for (std::size_t i = 0; i < held.blocks.size(); ++i) {
    const Digest& b = held.blocks[i];
    if (in_any_[b]++ == 0) changed_ = true;
    if (counts[b]++ != 0 || !record) {
      close_run();
      continue;
    }
    if (run.hashes.empty()) {
      run.medium = medium;
      run.scope = held.scope;
      run.adapter = held.adapter;
      run.parent = i == 0 ? seen.parent : std::optional(held.blocks[i - 1]);
    }
    run.hashes.push_back(b);
    const auto tokens = seen.tokens.subspan(seen.first_token + i * block, block);
    run.tokens.insert(run.tokens.end(), tokens.begin(), tokens.end());
  }
  close_run();
}

void HoldingsSummary::count_out(Medium medium, const Held& held) {
  Counts& counts = in_medium_[static_cast<int>(medium)];
  std::vector<Digest>* removed = recorded(held.scope) ? &removed_[{medium, held.scope}] : nullptr;
  for (const Digest& b : held.blocks) {
    if (auto it = counts.find(b); it != counts.end() && --it->second == 0) {
      counts.erase(it);
      if (removed != nullptr) removed->push_back(b);
    }
    if (auto it = in_any_.find(b); it != in_any_.end() && --it->second == 0) {
      in_any_.erase(it);
      changed_ = true;
    }
  }
}

HoldingsSummary::Held HoldingsSummary::segment_held(const Digest& key, const Digest& parent, engine::Pos begin,
                                                    std::span<const Token> tokens, const ScopeId& scope, Seen& seen) const {
  const auto block = static_cast<std::size_t>(hasher_.block_size());
  Held held{.scope = scope};
  seen = Seen{.tokens = tokens};
  if (begin > 0) seen.parent = parent;
  Digest h = parent;
  for (std::size_t at = 0; at + block <= tokens.size(); at += block) {
    h = hasher_.next(h, tokens.subspan(at, block));
    held.blocks.push_back(h);
  }
  if (static_cast<std::int32_t>(tokens.size()) == host_.segment_tokens() && !held.blocks.empty() &&
      held.blocks.back() != key) {
    held.blocks = {key};  // the segment covers a session's fork (see the top of this file)
    seen = Seen{.tokens = tokens, .first_token = tokens.size() / block * block - block};
  }
  return held;
}

std::string HoldingsSummary::segment_adapter(Medium medium, const SegmentMemo& memo, Digest parent,
                                             engine::Pos begin) const {
  if (labels_.empty()) return {};
  const DiskStore* disk = backing_.disk();
  while (begin > 0) {
    if (const auto found = memo.find(parent); found != memo.end()) return found->second.adapter;
    if (medium == Medium::host) {
      const HostSegment* before = host_.store().peek(parent);
      if (before == nullptr || before->begin >= begin) return {};
      begin = before->begin;
      parent = before->parent;
    } else {
      const std::optional<RecordMeta> before = disk != nullptr ? disk->meta(parent) : std::nullopt;
      if (!before || before->begin >= begin) return {};
      begin = before->begin;
      parent = before->parent;
    }
  }
  return labels_.find(parent);
}

void HoldingsSummary::label_namespace(const std::string& ns, const std::string& adapter) {
  labels_.add(hasher_.root(ns), adapter);
}

void HoldingsSummary::refresh_segments(Medium medium, std::optional<std::vector<Digest>> changed,
                                       std::vector<std::pair<Medium, Held>>& gone) {
  SegmentMemo& memo = segments_[static_cast<int>(medium)];
  DiskStore* disk = backing_.disk();
  const auto add = [&](SegmentMemo& into, const Digest& key, const Digest& parent, engine::Pos begin,
                       std::span<const Token> tokens, const ScopeId& scope) {
    Seen seen;
    Held held = segment_held(key, parent, begin, tokens, scope, seen);
    held.adapter = segment_adapter(medium, into, parent, begin);
    count_in(medium, into.emplace(key, std::move(held)).first->second, seen);
  };
  if (!changed) {
    // The whole store: what is in the memo carries over, the rest is new, the memo's rest is gone.
    SegmentMemo now;
    // True when `key` is already in `now` or carried over from the memo; else the caller adds it.
    const auto carried = [&](const Digest& key) {
      if (now.contains(key)) return true;
      const auto found = memo.find(key);
      if (found == memo.end()) return false;
      now.emplace(key, std::move(found->second));
      memo.erase(found);
      return true;
    };
    if (medium == Medium::host) {
      for (const auto& [parent, key] : host_.store().parent_links()) {
        const HostSegment* s = host_.store().peek(key);
        if (s != nullptr && !carried(key)) add(now, key, parent, s->begin, s->token_ids, s->scope);
      }
    } else if (disk != nullptr) {
      // The keys first, then the header of each new one outside the store's lock: a segment's label
      // is found through the headers of the segments before it, which asks the store again.
      std::vector<Digest> keys;
      disk->for_each_segment([&](const RecordMeta& meta) { keys.push_back(meta.key); });
      for (const Digest& key : keys) {
        if (carried(key)) continue;
        if (const std::optional<RecordMeta> meta = disk->meta(key); meta && meta->kind == RecordKind::segment) {
          add(now, key, meta->parent, meta->begin, meta->tokens, meta->scope);
        }
      }
    }
    for (auto& [key, held] : memo) gone.emplace_back(medium, std::move(held));
    memo = std::move(now);
    return;
  }
  // Only the keys the store changed: a key names fixed content, so one both held and listed is
  // unchanged, one held and not listed is new, one listed and no longer held is gone.
  for (const Digest& key : *changed) {
    if (medium == Medium::host) {
      const HostSegment* s = host_.store().peek(key);
      if (s == nullptr) {
        if (auto found = memo.find(key); found != memo.end()) {
          gone.emplace_back(medium, std::move(found->second));
          memo.erase(found);
        }
      } else if (!memo.contains(key)) {
        add(memo, key, s->parent, s->begin, s->token_ids, s->scope);
      }
      continue;
    }
    const std::optional<RecordMeta> meta = disk != nullptr ? disk->meta(key) : std::nullopt;
    if (!meta || meta->kind != RecordKind::segment) {
      if (auto found = memo.find(key); found != memo.end()) {
        gone.emplace_back(medium, std::move(found->second));
        memo.erase(found);
      }
    } else if (!memo.contains(key)) {
      add(memo, key, meta->parent, meta->begin, meta->tokens, meta->scope);
    }
  }
}

void HoldingsSummary::refresh() {
  changed_ = false;
  // Holders gone, counted out after every new one is counted in (see the top of this file).
  std::vector<std::pair<Medium, Held>> gone;

  // Device entries are few (one per holder sequence): walked whole.
  EntryMemo entries;
  for (const auto& [id, e] : device_.entries()) {
    const std::pair key{id, e.tokens.size()};
    if (auto found = entries_.find(key); found != entries_.end()) {
      entries.emplace(key, std::move(found->second));
      entries_.erase(found);
      continue;
    }
    const Held& held =
        entries.emplace(key, Held{hasher_.chain(e.lineage, e.tokens), e.scope, labels_.find(hasher_.root(e.lineage.ns))})
            .first->second;
    count_in(Medium::device, held, Seen{.tokens = e.tokens});
  }
  for (auto& [key, held] : entries_) gone.emplace_back(Medium::device, std::move(held));
  entries_ = std::move(entries);

  // Segments may number in the hundreds of thousands: only what each store changed is looked at.
  auto host_changed = host_.store().take_changed();
  auto disk_changed = backing_.disk() != nullptr ? backing_.disk()->take_changed() : std::nullopt;
  if (std::exchange(walk_all_, false)) {
    host_changed.reset();
    disk_changed.reset();
  }
  refresh_segments(Medium::host, std::move(host_changed), gone);
  if (backing_.disk() != nullptr) refresh_segments(Medium::disk, std::move(disk_changed), gone);

  for (const auto& [medium, held] : gone) count_out(medium, held);
  for (auto& [where, hashes] : removed_) {
    if (!hashes.empty()) events_.emplace_back(BlocksRemoved{std::move(hashes), where.first, where.second});
  }
  removed_.clear();
  if (changed_) ++version_;
}

CacheSummary HoldingsSummary::summary(std::optional<std::uint64_t> since, bool by_medium,
                                     const std::optional<ScopeId>& scope) {
  refresh();
  CacheSummary out;
  out.version = version_;
  out.model_key = backing_.model_key();
  if (since == version_) {
    out.unchanged = true;
    return out;
  }
  // Nothing is sorted here (the engine thread waits for this call): a caller that wants order
  // sorts its copy.
  out.blocks.reserve(in_any_.size());
  for (const auto& [b, n] : in_any_) out.blocks.push_back(b);
  if (by_medium && scope) {
    // One scope's: from the holders themselves (the counts are of every scope).
    std::array<std::unordered_set<Digest, DigestHash>, kMediumCount> sets;
    for (const auto& [key, held] : entries_) {
      if (held.scope == *scope) sets[static_cast<int>(Medium::device)].insert(held.blocks.begin(), held.blocks.end());
    }
    for (int m = 0; m < kMediumCount; ++m) {
      for (const auto& [key, held] : segments_[m]) {
        if (held.scope == *scope) sets[m].insert(held.blocks.begin(), held.blocks.end());
      }
    }
    for (const auto& set : sets) out.by_medium.emplace_back(set.begin(), set.end());
  } else if (by_medium) {
    for (const Counts& counts : in_medium_) {
      auto& blocks = out.by_medium.emplace_back();
      blocks.reserve(counts.size());
      for (const auto& [b, n] : counts) blocks.push_back(b);
    }
  }
  return out;
}

void HoldingsSummary::record_events(KvEventScopes scopes) {
  scopes_ = std::move(scopes);
  events_.clear();
  if (!scopes_) return;
  // A subscriber may know this server's blocks from an earlier process: it starts over.
  events_.emplace_back(AllBlocksCleared{});
  // Announce what is held now: count everything in afresh, walking every store whole.
  forget_all();
  refresh();
}

std::vector<KvEvent> HoldingsSummary::take_events() {
  if (!scopes_) return {};
  refresh();
  return std::exchange(events_, {});
}

void HoldingsSummary::forget_all() {
  entries_.clear();
  for (auto& memo : segments_) memo.clear();
  for (auto& counts : in_medium_) counts.clear();
  in_any_.clear();
  walk_all_ = true;
}

void HoldingsSummary::cleared() {
  if (!in_any_.empty()) ++version_;
  forget_all();
  if (scopes_) {
    events_.clear();  // whatever was pending is void: the subscriber forgets it all
    events_.emplace_back(AllBlocksCleared{});
  }
}

}  // namespace prefixd::cache
