#include "cache/prefix_cache.h"

#include <algorithm>
#include <spdlog/spdlog.h>

namespace prefixd::cache {
namespace {

using Clock = std::chrono::steady_clock;
using engine::SeqId;
using engine::Token;

std::string short_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 4); ++i) {
    out.push_back(kHex[static_cast<unsigned char>(bytes[i]) >> 4]);
    out.push_back(kHex[static_cast<unsigned char>(bytes[i]) & 15]);
  }
  return out;
}

}  // namespace

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::cold: return "cold";
    case Outcome::hit_extend: return "hit_extend";
    case Outcome::hit_restore: return "hit_restore";
    case Outcome::partial: return "partial";
    case Outcome::bypass: return "bypass";
  }
  return "cold";
}

// A finished sequence kept in the llama context under a holder sequence id.
struct DeviceEntry {
  EntryId id = 0;
  std::string ns;
  std::string session;
  std::vector<Token> tokens;
  std::vector<Digest> blocks;  // chain hashes of the whole blocks of `tokens`
  SeqId holder = -1;
  Clock::time_point last_used;
};

class PrefixCache::Impl {
 public:
  Impl(engine::Engine& engine, const CacheConfig& config, std::vector<SeqId> holders, SeqId scratch)
      : engine_(engine), config_(config), hasher_(config.hash, config.block_size),
        host_(config.host_capacity_bytes, std::max<std::int64_t>(0, config.max_entries)),
        free_holders_(std::move(holders)), scratch_(scratch) {
    std::reverse(free_holders_.begin(), free_holders_.end());
    publish();
  }

  bool can_reuse() const { return config_.enabled && engine::family_can_trim(engine_.model().family); }

  Acquisition acquire(const RequestKey& key, std::span<const Token> prompt, SeqId dst) {
    Acquisition result;
    if (!config_.enabled) {
      result.outcome = Outcome::bypass;
      return result;
    }
    if (!can_reuse() || prompt.size() < 2) {
      count_miss();
      return result;
    }
    const auto limit = static_cast<std::int32_t>(prompt.size()) - 1;  // the one-token guard
    const auto query = prompt.first(static_cast<size_t>(limit));

    // Device tier: token-exact longest match through the namespace's radix tree.
    RadixTree::Match device;
    DeviceEntry* entry = nullptr;
    if (auto tree = trees_.find(key.namespace_digest); tree != trees_.end()) {
      device = config_.apc_enabled ? tree->second.match(query, key.session)
                                   : tree->second.match_whole(query, key.session);
      if (device.length > 0) entry = &entries_.at(device.entry);
    }
    // Host tier: whole segments along the block chain, then at most one tail segment.
    const HostPlan host_plan = plan_host_restore(key.namespace_digest, query);
    const std::int32_t host_len = host_plan.length;

    if (entry != nullptr && device.length >= host_len && device.length >= config_.min_prefix) {
      engine_.copy_sequence(entry->holder, dst, 0, device.length);
      entry->last_used = Clock::now();
      result.reused = device.length;
      result.tier = "device";
      result.in_session = device.in_session;
      // Partial: the request diverges inside the stored entry (an edit, a regenerated reply).
      const bool whole = device.length == static_cast<std::int32_t>(entry->tokens.size()) || device.length == limit;
      result.outcome = whole ? Outcome::hit_extend : Outcome::partial;
    } else if (host_len >= config_.min_prefix) {
      const std::int32_t restored = restore_from_host(host_plan, dst);
      if (restored >= config_.min_prefix) {
        result.reused = restored;
        result.tier = "host";
        result.in_session = false;
        result.outcome = Outcome::hit_restore;
      } else {
        engine_.remove_sequence(dst, 0, -1);
        spdlog::debug("cache: host restore for namespace {} failed; prefilling cold", short_hex(key.namespace_digest));
      }
    }
    if (result.reused > 0) {
      stats_.hits += 1;
      stats_.tokens_reused += result.reused;
      spdlog::debug("cache: {} of {} prompt tokens reused ({}, {}, {})", result.reused, prompt.size(),
                    outcome_name(result.outcome), result.tier, result.in_session ? "in_session" : "cross_session");
    } else {
      count_miss();
    }
    if (config_.trace) {
      spdlog::info("cache trace: acquire ns={} session='{}' prompt={} device_match={} host_match={} -> {} reused={}",
                   short_hex(key.namespace_digest), key.session, prompt.size(), device.length, host_len,
                   outcome_name(result.outcome), result.reused);
    }
    publish();
    return result;
  }

  void donate(const RequestKey& key, std::span<const Token> tokens, SeqId seq) {
    const auto n = static_cast<std::int32_t>(tokens.size());
    if (!can_reuse() || n < config_.min_prefix || (free_holders_.empty() && entries_.empty())) {
      engine_.remove_sequence(seq, 0, -1);
      return;
    }
    RadixTree& tree = trees_[key.namespace_digest];
    // Already covered by a stored entry: nothing new to keep.
    if (RadixTree::Match m = tree.match(tokens, key.session); m.length == n) {
      entries_.at(m.entry).last_used = Clock::now();
      engine_.remove_sequence(seq, 0, -1);
      trace("donate: covered by entry {}", m.entry);
      publish();
      return;
    }
    // An entry that is a prefix of this sequence is superseded: reuse its holder.
    DeviceEntry* target = nullptr;
    if (RadixTree::Match w = tree.match_whole(tokens, key.session); w.length > 0) target = &entries_.at(w.entry);
    if (target == nullptr) {
      if (free_holders_.empty()) demote_lru(nullptr);
      if (free_holders_.empty()) {
        engine_.remove_sequence(seq, 0, -1);
        return;
      }
      const EntryId id = ++next_id_;
      target = &entries_[id];
      target->id = id;
      target->holder = free_holders_.back();
      free_holders_.pop_back();
    }
    engine_.remove_sequence(target->holder, 0, -1);
    engine_.copy_sequence(seq, target->holder, 0, n);
    engine_.remove_sequence(seq, 0, -1);
    target->ns = key.namespace_digest;
    target->session = key.session;
    target->tokens.assign(tokens.begin(), tokens.end());
    target->blocks = hasher_.chain(key.namespace_digest, tokens);
    target->last_used = Clock::now();
    trees_[target->ns].insert(target->id, target->tokens, target->session);
    trace("donate: entry {} holds {} tokens in sequence {}", target->id, n, target->holder);
    dirty_ = true;
    enforce_device_budget(target);
    publish();
  }

  std::int64_t release_device_cells(std::int64_t cells) {
    std::int64_t freed = 0;
    while (freed < cells && !entries_.empty()) {
      const std::int64_t before = device_tokens();
      demote_lru(nullptr);
      freed += before - device_tokens();
    }
    publish();
    return freed;
  }

  void expire() {
    const auto cutoff = Clock::now() - config_.ttl;
    std::vector<EntryId> old;
    for (const auto& [id, e] : entries_) {
      if (e.last_used < cutoff) old.push_back(id);
    }
    for (EntryId id : old) {
      drop(entries_.at(id));
      stats_.evictions_ttl += 1;
    }
    HostStore::Evicted evicted;
    host_.expire(cutoff, evicted);
    add_evictions(evicted);
    if (!old.empty() || evicted.total() > 0) publish();
  }

  bool compaction_due() const { return config_.compact_when_idle && dirty_ && can_reuse(); }

  CompactReport compact(std::span<const LiveSequence> running) {
    CompactReport report;
    if (!compaction_due()) return report;
    dirty_ = false;
    // Entries oldest first, then the running sequences, so a sequence's base is rewritten before
    // it; the base is the earlier sequence of the same namespace sharing the longest prefix (the
    // sharing the cells had, kept).
    struct Item {
      SeqId seq;
      std::string_view ns;
      std::span<const Token> tokens;
      const Item* base = nullptr;
      std::int32_t shared = 0;
      engine::Bytes tail;
      EntryId entry = 0;  // 0: a running sequence
      bool lost = false;
    };
    std::vector<DeviceEntry*> order;
    for (auto& [id, e] : entries_) order.push_back(&e);
    std::ranges::sort(order, [](const DeviceEntry* a, const DeviceEntry* b) { return a->id < b->id; });
    std::vector<Item> items;
    items.reserve(order.size() + running.size());
    for (DeviceEntry* e : order) items.push_back(Item{e->holder, e->ns, e->tokens, nullptr, 0, {}, e->id});
    for (const LiveSequence& r : running) items.push_back(Item{r.seq, r.namespace_digest, r.tokens, nullptr, 0, {}, 0, false});

    std::int64_t cells = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      Item& item = items[i];
      for (size_t j = 0; j < i && !item.ns.empty(); ++j) {
        if (items[j].ns != item.ns) continue;
        const auto common =
            static_cast<std::int32_t>(std::ranges::mismatch(items[j].tokens, item.tokens).in1 - items[j].tokens.begin());
        if (common > item.shared) {
          item.shared = common;
          item.base = &items[j];
        }
      }
      const auto n = static_cast<std::int32_t>(item.tokens.size());
      if (item.shared < n) {
        engine_.copy_sequence(item.seq, scratch_, item.shared, n);
        item.tail = engine_.save_sequence(scratch_);
        engine_.remove_sequence(scratch_, 0, -1);
        if (item.tail.empty()) return report;  // nothing has been changed yet
      }
      cells += n - item.shared;
    }
    engine_.clear();
    std::vector<EntryId> lost_entries;
    for (Item& item : items) {
      const auto n = static_cast<std::int32_t>(item.tokens.size());
      bool ok = item.base == nullptr || !item.base->lost;
      if (ok && item.base != nullptr) engine_.copy_sequence(item.base->seq, item.seq, 0, item.shared);
      if (ok && item.shared < n) {
        // The cells were all in use a moment ago, so they fit again; this is a safety net.
        ok = engine_.restore_sequence(item.tail, scratch_);
        if (ok) engine_.copy_sequence(scratch_, item.seq, item.shared, n);
        engine_.remove_sequence(scratch_, 0, -1);
      }
      if (!ok) {
        item.lost = true;
        engine_.remove_sequence(item.seq, 0, -1);
        if (item.entry != 0) {
          lost_entries.push_back(item.entry);
        } else {
          report.lost.push_back(item.seq);
        }
      }
    }
    for (EntryId id : lost_entries) drop(entries_.at(id));
    if (!lost_entries.empty() || !report.lost.empty()) {
      spdlog::warn("cache: compaction lost {} entries and {} running sequences", lost_entries.size(), report.lost.size());
    }
    report.cells = cells;
    stats_.compactions += 1;
    trace("compact: {} entries and {} running sequences, {} cells rewritten", order.size(), running.size(), cells);
    publish();
    return report;
  }

  ResetReport reset() {
    ResetReport report;
    report.entries = static_cast<std::int64_t>(entries_.size() + host_.size());
    report.bytes = device_bytes() + host_.bytes();
    while (!entries_.empty()) drop(entries_.begin()->second);
    host_.clear();
    publish();
    return report;
  }

  CacheStats stats() const {
    std::lock_guard lock(published_mutex_);
    return published_;
  }

 private:
  std::int64_t device_tokens() const {
    std::int64_t total = 0;
    for (const auto& [ns, tree] : trees_) total += tree.unique_tokens();
    return total;
  }
  std::uint64_t device_bytes() const {
    return static_cast<std::uint64_t>(device_tokens()) * engine_.model().kv_bytes_per_token;
  }

  std::int32_t segment_blocks() const { return std::max(1, config_.host_segment_tokens / config_.block_size); }
  std::int32_t segment_tokens() const { return segment_blocks() * config_.block_size; }

  // The host segments that rebuild the longest prefix of a query, in position order; of the last
  // one only its first `last_take` tokens are used.
  struct HostPlan {
    std::vector<Digest> keys;
    std::int32_t last_take = 0;
    std::int32_t length = 0;
  };

  // Segments lie on a grid of segment_blocks() blocks from position 0, keyed by the chain hash at
  // their end, so whole ones are found by walking the query's chain. Where the walk stops, any
  // segment hanging off the same parent (the grid segment the query diverges inside, or the
  // shorter tail of a demoted entry) is compared token by token and the longest match is taken.
  HostPlan plan_host_restore(const std::string& ns, std::span<const Token> query) {
    HostPlan plan;
    if (host_.size() == 0) return plan;
    const std::vector<Digest> chain = hasher_.chain(ns, query);
    const auto per = static_cast<size_t>(segment_blocks());
    size_t covered = 0;  // blocks
    for (size_t end = per; end <= chain.size() && host_.contains(chain[end - 1]); end += per) {
      plan.keys.push_back(chain[end - 1]);
      covered = end;
    }
    plan.length = static_cast<std::int32_t>(covered) * config_.block_size;
    plan.last_take = plan.keys.empty() ? 0 : segment_tokens();
    const Digest parent = covered == 0 ? hasher_.root(ns) : chain[covered - 1];
    const auto rest = query.subspan(static_cast<size_t>(plan.length));
    std::int32_t best = 0;
    for (const Digest& key : host_.children(parent)) {
      const HostSegment* segment = host_.peek(key);
      if (segment == nullptr || segment->begin != plan.length) continue;
      const auto common = static_cast<std::int32_t>(
          std::ranges::mismatch(segment->token_ids, rest).in1 - segment->token_ids.begin());
      if (common > best) {
        if (best == 0) plan.keys.push_back(key);
        plan.keys.back() = key;
        best = common;
      }
    }
    if (best > 0) {
      plan.last_take = best;
      plan.length += best;
    }
    return plan;
  }

  // Restores the planned segments into `dst` through the scratch sequence. Returns the tokens
  // restored; a segment that fails to restore is removed from the host tier and stops the walk.
  std::int32_t restore_from_host(const HostPlan& plan, SeqId dst) {
    // Touch deepest first so that parents stay more recently used than their children.
    for (auto key = plan.keys.rbegin(); key != plan.keys.rend(); ++key) host_.touch(*key);
    std::int32_t restored = 0;
    for (size_t i = 0; i < plan.keys.size(); ++i) {
      const Digest& key = plan.keys[i];
      const HostSegment* segment = host_.touch(key);
      if (segment == nullptr || segment->begin != restored || !engine_.restore_sequence(segment->state, scratch_)) {
        stats_.failed_restores += 1;
        spdlog::warn("cache: host segment at position {} could not be restored; dropped", restored);
        host_.erase(key);
        engine_.remove_sequence(scratch_, 0, -1);
        break;
      }
      const std::int32_t take = i + 1 == plan.keys.size() ? plan.last_take : segment->tokens;
      engine_.copy_sequence(scratch_, dst, restored, restored + take);
      engine_.remove_sequence(scratch_, 0, -1);
      restored += take;
    }
    return restored;
  }

  // Moves the least recently used idle entry (other than `keep`) to the host tier.
  void demote_lru(const DeviceEntry* keep) {
    DeviceEntry* victim = nullptr;
    for (auto& [id, e] : entries_) {
      if (&e == keep) continue;
      if (victim == nullptr || e.last_used < victim->last_used) victim = &e;
    }
    if (victim == nullptr) return;
    save_to_host(*victim);
    drop(*victim);
    stats_.demotions += 1;
  }

  // Saves the entry as grid segments plus one shorter tail segment for the tokens past the last
  // grid line (a partial last block included: the tail's key hashes its tokens, not the chain).
  void save_to_host(const DeviceEntry& e) {
    if (config_.host_capacity_bytes == 0 || e.tokens.empty()) return;
    const auto n = static_cast<std::int32_t>(e.tokens.size());
    const std::int32_t grid = segment_tokens();
    const auto span = std::span<const Token>(e.tokens);
    HostStore::Evicted evicted;
    std::vector<Digest> stored;  // in position order
    for (std::int32_t begin = 0; begin < n; begin += grid) {
      const std::int32_t stop = std::min(begin + grid, n);
      const Digest parent = begin == 0 ? hasher_.root(e.ns) : e.blocks[static_cast<size_t>(begin / config_.block_size) - 1];
      const auto tokens = span.subspan(static_cast<size_t>(begin), static_cast<size_t>(stop - begin));
      const Digest key = stop - begin == grid ? e.blocks[static_cast<size_t>(stop / config_.block_size) - 1]
                                              : hasher_.next(parent, tokens);
      if (host_.touch(key) == nullptr) {
        engine_.copy_sequence(e.holder, scratch_, begin, stop);
        HostSegment segment{begin, stop - begin, parent, {tokens.begin(), tokens.end()},
                            engine_.save_sequence(scratch_), Clock::now()};
        engine_.remove_sequence(scratch_, 0, -1);
        if (segment.state.empty() || !host_.insert(key, std::move(segment), evicted, stored)) break;
      }
      stored.push_back(key);
    }
    // The walk left the deepest segment most recently used; touch from the deepest up so that
    // later evictions take leaves before the prefixes they extend.
    for (auto key = stored.rbegin(); key != stored.rend(); ++key) host_.touch(*key);
    add_evictions(evicted);
  }

  void drop(DeviceEntry& e) {
    engine_.remove_sequence(e.holder, 0, -1);
    free_holders_.push_back(e.holder);
    if (auto tree = trees_.find(e.ns); tree != trees_.end()) {
      tree->second.erase(e.id);
      if (tree->second.size() == 0) trees_.erase(tree);
    }
    entries_.erase(e.id);
  }

  void enforce_device_budget(const DeviceEntry* keep) {
    while (device_tokens() > config_.device_cells && entries_.size() > 1) demote_lru(keep);
    while (static_cast<std::int64_t>(entries_.size() + host_.size()) > config_.max_entries && entries_.size() > 1) {
      demote_lru(keep);
      stats_.evictions_lru += 1;
    }
  }

  void add_evictions(const HostStore::Evicted& evicted) {
    stats_.evictions_lru += evicted.lru;
    stats_.evictions_ttl += evicted.ttl;
    stats_.evictions_capacity += evicted.capacity;
  }

  void count_miss() { stats_.misses += 1; }

  template <typename... Args>
  void trace(fmt::format_string<Args...> format, Args&&... args) {
    if (config_.trace) spdlog::info("cache trace: {}", fmt::format(format, std::forward<Args>(args)...));
  }

  void publish() {
    CacheStats s = stats_;
    s.enabled = config_.enabled;
    s.apc_enabled = config_.apc_enabled && can_reuse();
    s.device_entries = static_cast<std::int64_t>(entries_.size());
    s.device_tokens = device_tokens();
    s.device_bytes = device_bytes();
    s.device_cells_budget = config_.device_cells;
    s.host_entries = static_cast<std::int64_t>(host_.size());
    s.host_bytes = host_.bytes();
    s.host_capacity_bytes = config_.host_capacity_bytes;
    s.max_entries = config_.max_entries;
    s.block_size = config_.block_size;
    s.hash = hash_algorithm_name(config_.hash);
    std::int64_t blocks = 0, active = 0;
    for (const auto& [id, e] : entries_) {
      blocks += static_cast<std::int64_t>(e.blocks.size());
      active += e.blocks.empty() ? 0 : 1;
    }
    const std::int64_t host_blocks = host_.tokens() / config_.block_size;
    s.total_blocks_stored = blocks + host_blocks;
    s.unique_block_hashes = device_tokens() / config_.block_size + host_blocks;
    s.apc_active_entries = active;
    std::lock_guard lock(published_mutex_);
    published_ = std::move(s);
  }

  engine::Engine& engine_;
  CacheConfig config_;
  BlockHasher hasher_;
  HostStore host_;
  std::vector<SeqId> free_holders_;
  SeqId scratch_;
  std::unordered_map<EntryId, DeviceEntry> entries_;
  std::unordered_map<std::string, RadixTree> trees_;  // by namespace digest
  EntryId next_id_ = 0;
  bool dirty_ = false;  // an entry was donated since the last compaction
  CacheStats stats_;  // counters; the rest of a snapshot is derived in publish()

  mutable std::mutex published_mutex_;
  CacheStats published_;
};

PrefixCache::PrefixCache(engine::Engine& engine, CacheConfig config, std::vector<SeqId> holders, SeqId scratch)
    : impl_(std::make_unique<Impl>(engine, config, std::move(holders), scratch)), config_(config) {}
PrefixCache::~PrefixCache() = default;

bool PrefixCache::can_reuse() const { return impl_->can_reuse(); }
Acquisition PrefixCache::acquire(const RequestKey& key, std::span<const Token> prompt, SeqId dst) {
  return impl_->acquire(key, prompt, dst);
}
void PrefixCache::donate(const RequestKey& key, std::span<const Token> tokens, SeqId seq) {
  impl_->donate(key, tokens, seq);
}
std::int64_t PrefixCache::release_device_cells(std::int64_t cells) { return impl_->release_device_cells(cells); }
void PrefixCache::expire() { impl_->expire(); }
CompactReport PrefixCache::compact(std::span<const LiveSequence> running) { return impl_->compact(running); }
bool PrefixCache::compaction_due() const { return impl_->compaction_due(); }
ResetReport PrefixCache::reset() { return impl_->reset(); }
CacheStats PrefixCache::stats() const { return impl_->stats(); }

}  // namespace prefixd::cache
