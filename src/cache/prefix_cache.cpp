#include "cache/prefix_cache.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <spdlog/spdlog.h>

#include "cache/host_tier.h"
#include "cache/radix_tree.h"

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

std::int32_t common_prefix(std::span<const Token> a, std::span<const Token> b) {
  return static_cast<std::int32_t>(std::ranges::mismatch(a, b).in1 - a.begin());
}

CacheConfig resolve(CacheConfig config, const engine::Engine& engine) {
  const bool gpu = engine.model().on_accelerator;
  if (!config.device_cells) config.device_cells = gpu ? engine.context_size() / 2 : 0;
  // Measured on the CPU (docs/design.md): with idle cells demoted as soon as a request runs,
  // rewriting the device tier when idle made prefill slower, not faster; on a GPU it would be a
  // round trip over the bus. So automatic means never; `idle` remains an explicit choice.
  if (config.compaction == Compaction::automatic) config.compaction = Compaction::never;
  config.block_size = std::max(1, config.block_size);
  if (!engine::family_can_trim(engine.model().family)) config.compaction = Compaction::never;
  return config;
}

// A finished sequence kept in the llama context under a holder sequence id.
struct DeviceEntry {
  EntryId id = 0;
  std::string ns;
  std::string session;
  std::vector<Token> tokens;
  SeqId holder = -1;
  Clock::time_point last_used;
};

// A running request's sequence, from acquire() to donate() or release().
struct Lease {
  SeqId seq = -1;
  std::uint64_t order = 0;    // registration order: a lease only ever waits for an older one
  RequestKey key;
  std::vector<Token> prompt;
  std::int32_t computed = 0;  // positions [0, computed) of the prompt are in `seq`
  std::int32_t locked = 0;    // positions [0, locked) are the tree's cells, locked in the tree
  std::optional<SeqId> waits_for;
  std::int32_t wait_until = 0;
};

}  // namespace

Compaction parse_compaction(std::string_view name) {
  if (name == "auto" || name == "automatic") return Compaction::automatic;
  if (name == "idle") return Compaction::idle;
  if (name == "never" || name == "off") return Compaction::never;
  throw std::invalid_argument("unknown compaction policy '" + std::string(name) + "' (auto, idle, never)");
}

const char* compaction_name(Compaction compaction) {
  switch (compaction) {
    case Compaction::automatic: return "auto";
    case Compaction::idle: return "idle";
    case Compaction::never: return "never";
  }
  return "auto";
}

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

const char* tier_name(Tier tier) {
  switch (tier) {
    case Tier::none: return "";
    case Tier::device: return "device";
    case Tier::host: return "host";
  }
  return "";
}

class PrefixCache::Impl {
 public:
  Impl(engine::Engine& engine, const CacheConfig& config, std::vector<SeqId> holders, SeqId scratch)
      : engine_(engine), config_(resolve(config, engine)), hasher_(config_.hash, config_.block_size),
        host_(engine, hasher_, config_.host_segment_tokens, config_.host_capacity_bytes,
              std::max<std::int64_t>(0, config_.host_max_segments), scratch),
        holder_count_(static_cast<std::int64_t>(holders.size())), free_holders_(std::move(holders)), scratch_(scratch) {
    std::reverse(free_holders_.begin(), free_holders_.end());
    publish();
  }

  const CacheConfig& config() const { return config_; }
  bool can_reuse() const { return config_.enabled && engine::family_can_trim(engine_.model().family); }

  Acquisition acquire(const RequestKey& key, std::span<const Token> prompt, SeqId seq) {
    if (!config_.enabled) {
      Acquisition bypass{Outcome::bypass};
      record(bypass);
      publish();
      return bypass;
    }
    Lease& lease = leases_[seq];
    lease = Lease{seq, ++next_order_, key, {prompt.begin(), prompt.end()}};
    const Acquisition got = find_and_adopt(lease);
    if (!got.waiting) record(got);
    trace("acquire seq={} ns={} session='{}' prompt={} -> {} reused={} tier={}{}", seq, short_hex(key.namespace_digest),
          key.session, prompt.size(), outcome_name(got.outcome), got.reused, tier_name(got.tier),
          got.waiting ? " (waiting)" : "");
    publish();
    return got;
  }

  Acquisition bypass() {
    Acquisition got{Outcome::bypass};
    record(got);
    publish();
    return got;
  }

  void advance(SeqId seq, std::int32_t computed) {
    if (auto it = leases_.find(seq); it != leases_.end()) {
      it->second.computed = std::min<std::int32_t>(computed, static_cast<std::int32_t>(it->second.prompt.size()));
    }
  }

  std::vector<Resolved> poll() {
    std::vector<Resolved> out;
    std::vector<Lease*> waiting;
    for (auto& [seq, lease] : leases_) {
      if (lease.waits_for) waiting.push_back(&lease);
    }
    std::ranges::sort(waiting, [](const Lease* a, const Lease* b) { return a->order < b->order; });
    for (Lease* lease : waiting) {
      auto target = leases_.find(*lease->waits_for);
      const bool ready = target == leases_.end() || target->second.computed >= lease->wait_until;
      if (!ready) continue;
      lease->waits_for.reset();
      const Acquisition got = find_and_adopt(*lease);
      if (got.waiting) continue;
      record(got);
      trace("resolved seq={} -> {} reused={}", lease->seq, outcome_name(got.outcome), got.reused);
      out.push_back(Resolved{lease->seq, got});
    }
    if (!out.empty()) publish();
    return out;
  }

  void donate(SeqId seq, std::span<const Token> tokens) {
    auto found = leases_.find(seq);
    if (found == leases_.end()) {
      engine_.remove_sequence(seq, 0, -1);
      return;
    }
    Lease lease = std::move(found->second);
    leases_.erase(found);
    const std::int32_t canonical = lease.locked;  // positions already holding the tree's cells
    unlock(lease);
    const auto n = static_cast<std::int32_t>(tokens.size());
    const std::string& ns = lease.key.namespace_digest;
    if (!can_reuse() || n < config_.min_prefix || holder_count_ == 0) {
      engine_.remove_sequence(seq, 0, -1);
      enforce_device_budget();
      publish();
      return;
    }
    RadixTree& tree = trees_[ns];
    const RadixTree::Match longest = tree.match(tokens, lease.key.session);
    if (longest.length == n) {  // covered by a stored entry: nothing new to keep
      entries_.at(longest.entry).last_used = Clock::now();
      engine_.remove_sequence(seq, 0, -1);
      trace("donate seq={}: covered by entry {}", seq, longest.entry);
      after_tree_change(ns);
      return;
    }
    // Shared in the tree means shared in the KV: the prefix this sequence has in common with the
    // tree takes the tree's cells (unless they already are the tree's: locked when adopted).
    if (longest.length > canonical) {
      engine_.remove_sequence(seq, 0, longest.length);
      engine_.copy_sequence(entries_.at(longest.entry).holder, seq, 0, longest.length);
    }
    // The same session's entry that this sequence extends (the previous turn) gives its holder.
    EntryId superseded = 0;
    if (const RadixTree::Match whole = tree.match_whole(tokens, lease.key.session); whole.length > 0 && whole.in_session) {
      superseded = whole.entry;
    }
    SeqId holder = -1;
    if (superseded != 0) {
      holder = entries_.at(superseded).holder;
    } else if (free_holders_.empty() && !free_a_holder(ns)) {
      engine_.remove_sequence(seq, 0, -1);
      trace("donate seq={}: every holder is in use by locked entries; dropped", seq);
      after_tree_change(ns);
      return;
    } else {
      holder = free_holders_.back();
      free_holders_.pop_back();
    }
    // Everything the superseded entry held lies inside [0, longest.length) of `seq` now.
    engine_.remove_sequence(holder, 0, -1);
    engine_.copy_sequence(seq, holder, 0, n);
    engine_.remove_sequence(seq, 0, -1);
    const EntryId id = ++next_id_;
    DeviceEntry& entry = entries_[id];
    entry = DeviceEntry{id, ns, lease.key.session, {tokens.begin(), tokens.end()}, holder, Clock::now()};
    tree.insert(id, entry.tokens, entry.session);
    if (superseded != 0) {
      tree.erase(superseded);
      entries_.erase(superseded);
    }
    newest_ = id;
    donated_since_compaction_ = true;
    trace("donate seq={}: entry {} holds {} tokens in sequence {}", seq, id, n, holder);
    after_tree_change(ns);
  }

  void release(SeqId seq) {
    if (auto found = leases_.find(seq); found != leases_.end()) {
      unlock(found->second);
      leases_.erase(found);
    }
    engine_.remove_sequence(seq, 0, -1);
    enforce_device_budget();  // what it had locked may be idle now
    publish();
  }

  std::int32_t locked_by(SeqId seq) const {
    auto it = leases_.find(seq);
    return it == leases_.end() ? 0 : it->second.locked;
  }

  std::int64_t device_cells() const {
    std::int64_t total = 0;
    for (const auto& [ns, tree] : trees_) total += tree.unique_tokens();
    return total;
  }
  std::int64_t locked_cells() const {
    std::int64_t total = 0;
    for (const auto& [ns, tree] : trees_) total += tree.locked_tokens();
    return total;
  }
  std::int64_t idle_cells() const { return device_cells() - locked_cells(); }
  std::int64_t budgeted_idle_cells() const {
    std::int64_t own = 0;
    if (auto it = entries_.find(newest_); it != entries_.end()) {
      const DeviceEntry& e = it->second;
      own = static_cast<std::int64_t>(e.tokens.size()) - trees_.at(e.ns).locked_length(e.id);
    }
    return idle_cells() - own;
  }

  std::string verify() const {
    std::string problems;
    std::int64_t entries = 0;
    for (const auto& [ns, tree] : trees_) {
      entries += static_cast<std::int64_t>(tree.size());
      if (tree.locked_tokens() > tree.unique_tokens()) problems += "more locked than held tokens; ";
    }
    if (entries != static_cast<std::int64_t>(entries_.size())) problems += "tree entries differ from device entries; ";
    for (const auto& [id, e] : entries_) {
      const auto it = trees_.find(e.ns);
      if (it == trees_.end() || !it->second.contains(id) ||
          it->second.length(id) != static_cast<std::int32_t>(e.tokens.size())) {
        problems += "entry " + std::to_string(id) + " is not in its tree as stored; ";
      }
    }
    if (static_cast<std::int64_t>(entries_.size() + free_holders_.size()) != holder_count_) problems += "holders leaked; ";
    for (const auto& [seq, lease] : leases_) {
      if (lease.locked > lease.computed) problems += "a lease locks more than it holds; ";
    }
    problems += host_.store().verify_lru_order();
    return problems;
  }

  std::int64_t release_device_cells(std::int64_t cells) {
    const std::int64_t before = device_cells();
    while (before - device_cells() < cells) {
      DeviceEntry* victim = least_recently_used([](const DeviceEntry&) { return true; });
      if (victim == nullptr) break;
      demote(*victim);
    }
    publish();
    return before - device_cells();
  }

  void expire() {
    const auto cutoff = Clock::now() - config_.ttl;
    bool changed = false;
    while (DeviceEntry* victim = least_recently_used([&](const DeviceEntry& e) { return e.last_used < cutoff; })) {
      const std::string ns = victim->ns;
      cut_back(*victim);
      stats_.evictions_ttl += 1;
      repin(ns);
      changed = true;
    }
    HostStore::Evicted evicted;
    host_.store().expire(cutoff, evicted);
    add_evictions(evicted);
    if (changed || evicted.total() > 0) publish();
  }

  bool compaction_due() const {
    return config_.compaction == Compaction::idle && donated_since_compaction_ && leases_.empty() && can_reuse();
  }

  std::int64_t compact() {
    if (!compaction_due()) return 0;
    donated_since_compaction_ = false;
    // Entries oldest first, so an entry's base (the earlier entry of the same namespace sharing
    // the longest prefix: the sharing the cells had) is rewritten before it.
    struct Item {
      DeviceEntry* entry;
      const Item* base = nullptr;
      std::int32_t shared = 0;
      engine::Bytes tail;
    };
    std::vector<Item> items;
    for (auto& [id, e] : entries_) items.push_back(Item{&e});
    std::ranges::sort(items, [](const Item& a, const Item& b) { return a.entry->id < b.entry->id; });
    std::int64_t cells = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      Item& item = items[i];
      for (size_t j = 0; j < i; ++j) {
        if (items[j].entry->ns != item.entry->ns) continue;
        const std::int32_t common = common_prefix(items[j].entry->tokens, item.entry->tokens);
        if (common > item.shared) {
          item.shared = common;
          item.base = &items[j];
        }
      }
      const auto n = static_cast<std::int32_t>(item.entry->tokens.size());
      if (item.shared < n) {
        engine_.copy_sequence(item.entry->holder, scratch_, item.shared, n);
        item.tail = engine_.save_sequence(scratch_);
        engine_.remove_sequence(scratch_, 0, -1);
        if (item.tail.empty()) return 0;  // nothing has been changed yet
      }
      cells += n - item.shared;
    }
    engine_.clear();
    std::vector<EntryId> lost;
    std::vector<bool> ok(items.size(), true);
    for (size_t i = 0; i < items.size(); ++i) {
      Item& item = items[i];
      const auto n = static_cast<std::int32_t>(item.entry->tokens.size());
      const size_t base = item.base == nullptr ? i : static_cast<size_t>(item.base - items.data());
      ok[i] = base == i || ok[base];
      if (ok[i] && item.base != nullptr) engine_.copy_sequence(item.base->entry->holder, item.entry->holder, 0, item.shared);
      if (ok[i] && item.shared < n) {
        // The cells were all in use a moment ago, so they fit again; this is a safety net.
        ok[i] = engine_.restore_sequence(item.tail, scratch_);
        if (ok[i]) engine_.copy_sequence(scratch_, item.entry->holder, item.shared, n);
        engine_.remove_sequence(scratch_, 0, -1);
      }
      if (!ok[i]) lost.push_back(item.entry->id);
    }
    for (EntryId id : lost) drop(entries_.at(id));
    if (!lost.empty()) spdlog::warn("cache: compaction lost {} entries", lost.size());
    stats_.compactions += 1;
    trace("compact: {} entries, {} cells rewritten", items.size(), cells);
    publish();
    return cells;
  }

  ResetReport reset() {
    ResetReport report;
    report.entries = static_cast<std::int64_t>(entries_.size() + host_.store().size());
    report.bytes = device_bytes() + host_.store().bytes();
    for (auto& [id, e] : entries_) {
      engine_.remove_sequence(e.holder, 0, -1);
      free_holders_.push_back(e.holder);
    }
    entries_.clear();
    trees_.clear();
    for (auto& [seq, lease] : leases_) lease.locked = 0;  // their cells are their own now
    host_.store().clear();
    publish();
    return report;
  }

  CacheStats stats() const {
    std::lock_guard lock(published_mutex_);
    return published_;
  }

 private:
  std::uint64_t device_bytes() const {
    return static_cast<std::uint64_t>(device_cells()) * engine_.model().kv_bytes_per_token;
  }

  // The best source for `lease`'s prompt now, adopted into its sequence; or a wait for an older
  // running request that is computing a longer prefix.
  Acquisition find_and_adopt(Lease& lease) {
    Acquisition got;
    const auto n = static_cast<std::int32_t>(lease.prompt.size());
    if (!can_reuse() || n < 2) return got;
    const auto query = std::span<const Token>(lease.prompt).first(static_cast<size_t>(n - 1));  // one-token guard
    const std::string& ns = lease.key.namespace_digest;

    RadixTree::Match device;
    if (auto tree = trees_.find(ns); tree != trees_.end()) {
      device = config_.apc_enabled ? tree->second.match(query, lease.key.session)
                                   : tree->second.match_whole(query, lease.key.session);
    }
    // In flight: an older running request of the namespace holds (or will hold) a prefix.
    const Lease* peer = nullptr;
    std::int32_t peer_common = 0, peer_now = 0;
    for (const auto& [seq, other] : leases_) {
      if (other.order >= lease.order || other.key.namespace_digest != ns) continue;
      const std::int32_t common = common_prefix(query, other.prompt);
      if (common > peer_common || (common == peer_common && std::min(common, other.computed) > peer_now)) {
        peer = &other;
        peer_common = common;
        peer_now = std::min(common, other.computed);
      }
    }
    const HostTier::Plan host_plan = host_.plan(ns, query);
    const std::int32_t best_now = std::max({device.length, peer_now, host_plan.length});
    if (peer != nullptr && peer_common >= best_now + config_.min_prefix) {
      lease.waits_for = peer->seq;
      lease.wait_until = peer_common;
      got.waiting = true;
      return got;
    }
    if (device.length >= config_.min_prefix && device.length >= peer_now && device.length >= host_plan.length) {
      DeviceEntry& entry = entries_.at(device.entry);
      engine_.copy_sequence(entry.holder, lease.seq, 0, device.length);
      entry.last_used = Clock::now();
      lock(lease, device.length);
      const bool whole = device.length == static_cast<std::int32_t>(entry.tokens.size()) || device.length == n - 1;
      got = Acquisition{whole ? Outcome::hit_extend : Outcome::partial, device.length, Tier::device, device.in_session};
      enforce_running_budget();
    } else if (peer != nullptr && peer_now >= config_.min_prefix && peer_now >= host_plan.length) {
      engine_.copy_sequence(peer->seq, lease.seq, 0, peer_now);
      lock(lease, std::min(peer_now, peer->locked));
      const bool whole = peer_now == static_cast<std::int32_t>(peer->prompt.size()) || peer_now == n - 1;
      got = Acquisition{whole ? Outcome::hit_extend : Outcome::partial, peer_now, Tier::device,
                        peer->key.session == lease.key.session};
      stats_.inflight_shares += 1;
      enforce_running_budget();
    } else if (host_plan.length >= config_.min_prefix) {
      // Positions the device tier holds come from its cells; the host tier restores the rest.
      std::int32_t from = 0;
      if (device.length > 0) {
        DeviceEntry& entry = entries_.at(device.entry);
        engine_.copy_sequence(entry.holder, lease.seq, 0, device.length);
        entry.last_used = Clock::now();
        lock(lease, device.length);
        from = device.length;
      }
      enforce_running_budget();  // before the restore, so its cells can take the freed ones
      const std::int32_t held = host_.restore(host_plan, lease.seq, from, stats_.failed_restores);
      if (held >= config_.min_prefix && held > from) {
        got = Acquisition{Outcome::hit_restore, held, Tier::host, false};
      } else {
        unlock(lease);
        engine_.remove_sequence(lease.seq, 0, -1);
      }
    } else {
      enforce_running_budget();
    }
    lease.computed = got.reused;
    return got;
  }

  void lock(Lease& lease, std::int32_t length) {
    unlock(lease);
    if (length <= 0) return;
    trees_.at(lease.key.namespace_digest).lock(lease.prompt, length);
    lease.locked = length;
  }
  void unlock(Lease& lease) {
    if (lease.locked > 0) {
      if (auto tree = trees_.find(lease.key.namespace_digest); tree != trees_.end()) {
        tree->second.unlock(lease.prompt, lease.locked);
      }
    }
    lease.locked = 0;
  }

  // After the tree of `ns` gained an entry: running sequences whose computed prompt prefix the
  // tree now holds beyond what they lock take the tree's cells for it (freeing their duplicates),
  // so that cells shared in the tree stay shared in the KV. Then the stats are published.
  void after_tree_change(const std::string& ns) {
    repin(ns);
    enforce_device_budget();
    publish();
  }
  void repin(const std::string& ns) {
    auto tree = trees_.find(ns);
    if (tree == trees_.end()) return;
    if (tree->second.size() == 0) {
      trees_.erase(tree);
      return;
    }
    for (auto& [seq, lease] : leases_) {
      if (lease.key.namespace_digest != ns || lease.computed <= lease.locked) continue;
      const auto held = std::span<const Token>(lease.prompt).first(static_cast<size_t>(lease.computed));
      const RadixTree::Match m = tree->second.match(held, lease.key.session);
      if (m.length <= lease.locked) continue;
      engine_.remove_sequence(seq, 0, m.length);
      engine_.copy_sequence(entries_.at(m.entry).holder, seq, 0, m.length);
      lock(lease, m.length);
    }
  }

  template <typename Pred>
  DeviceEntry* least_recently_used(Pred eligible) {
    DeviceEntry* victim = nullptr;
    for (auto& [id, e] : entries_) {
      if (!eligible(e) || !trees_.contains(e.ns)) continue;
      if (trees_.at(e.ns).keep_length(id) >= static_cast<std::int32_t>(e.tokens.size())) continue;  // frees nothing
      if (victim == nullptr || e.last_used < victim->last_used) victim = &e;
    }
    return victim;
  }

  // While a request runs the newest entry has no exemption: idle cells above the budget would make
  // every token it computes attend over them (on the CPU, budget 0: llama-server's single slot
  // likewise keeps its previous prompt only when the next one extends it).
  void enforce_running_budget() {
    while (idle_cells() > *config_.device_cells) {
      DeviceEntry* victim = least_recently_used([](const DeviceEntry&) { return true; });
      if (victim == nullptr) break;
      demote(*victim);
    }
  }

  // Keeps idle cells within the budget, not counting the newest entry's own cells.
  void enforce_device_budget() {
    while (budgeted_idle_cells() > *config_.device_cells) {
      DeviceEntry* victim = least_recently_used([this](const DeviceEntry& e) { return e.id != newest_; });
      if (victim == nullptr) break;
      demote(*victim);
    }
  }

  // Frees a holder for a new entry of `ns` by demoting the least recently used entry that can be
  // dropped whole (nothing it holds is locked, or another entry holds it too).
  bool free_a_holder(const std::string& ns) {
    DeviceEntry* victim = nullptr;
    for (auto& [id, e] : entries_) {
      const RadixTree& tree = trees_.at(e.ns);
      const std::int32_t keep = tree.keep_length(id);
      if (keep > 0 && !tree.shared_with_another(id, keep)) continue;
      if (victim == nullptr || e.last_used < victim->last_used) victim = &e;
    }
    if (victim == nullptr) return false;
    const std::string victim_ns = victim->ns;
    save_to_host(*victim);
    drop(*victim);
    if (victim_ns != ns) repin(victim_ns);
    return true;
  }

  // Moves an entry's K/V to the host tier, then gives up its cells that nobody else uses.
  void demote(DeviceEntry& e) {
    const std::string ns = e.ns;
    save_to_host(e);
    cut_back(e);
    repin(ns);
  }

  void save_to_host(const DeviceEntry& e) {
    HostStore::Evicted evicted;
    if (host_.save(e.ns, e.tokens, e.holder, evicted)) {
      stats_.demotions += 1;
    } else {
      stats_.device_evictions += 1;
    }
    add_evictions(evicted);
  }

  // Cuts an entry back to what others use of it (locked cells, or a prefix another entry holds):
  // dropped whole when that is nothing or another entry holds it all.
  void cut_back(DeviceEntry& e) {
    RadixTree& tree = trees_.at(e.ns);
    const std::int32_t keep = tree.keep_length(e.id);
    if (keep == 0 || tree.shared_with_another(e.id, keep)) {
      drop(e);
      return;
    }
    engine_.remove_sequence(e.holder, keep, -1);
    tree.truncate(e.id, keep);
    e.tokens.resize(static_cast<size_t>(keep));
  }

  void drop(DeviceEntry& e) {
    engine_.remove_sequence(e.holder, 0, -1);
    free_holders_.push_back(e.holder);
    if (auto tree = trees_.find(e.ns); tree != trees_.end()) tree->second.erase(e.id);
    entries_.erase(e.id);
  }

  void add_evictions(const HostStore::Evicted& evicted) {
    stats_.evictions_lru += evicted.lru;
    stats_.evictions_ttl += evicted.ttl;
    stats_.evictions_capacity += evicted.capacity;
  }

  void record(const Acquisition& got) {
    stats_.outcomes[static_cast<size_t>(got.outcome)] += 1;
    if (got.outcome == Outcome::bypass) return;
    if (got.reused > 0) {
      stats_.hits += 1;
      stats_.tokens_reused += got.reused;
    } else {
      stats_.misses += 1;
    }
  }

  template <typename... Args>
  void trace(fmt::format_string<Args...> format, Args&&... args) {
    if (config_.trace) spdlog::info("cache trace: {}", fmt::format(format, std::forward<Args>(args)...));
  }

  void publish() {
    CacheStats s = stats_;
    s.enabled = config_.enabled;
    s.apc_enabled = config_.apc_enabled && can_reuse();
    s.device_entries = static_cast<std::int64_t>(entries_.size());
    s.device_holders = holder_count_;
    s.device_cells = device_cells();
    s.device_locked_cells = locked_cells();
    s.device_bytes = device_bytes();
    s.device_cells_budget = *config_.device_cells;
    s.host_entries = static_cast<std::int64_t>(host_.store().size());
    s.host_max_segments = config_.host_max_segments;
    s.host_bytes = host_.store().bytes();
    s.host_capacity_bytes = config_.host_capacity_bytes;
    s.running = static_cast<std::int64_t>(leases_.size());
    s.waiting = std::ranges::count_if(leases_, [](const auto& kv) { return kv.second.waits_for.has_value(); });
    s.block_size = config_.block_size;
    s.hash = hash_algorithm_name(config_.hash);
    std::int64_t blocks = 0, active = 0;
    for (const auto& [id, e] : entries_) {
      const auto whole = static_cast<std::int64_t>(e.tokens.size()) / config_.block_size;
      blocks += whole;
      active += whole > 0 ? 1 : 0;
    }
    const std::int64_t host_blocks = host_.store().tokens() / config_.block_size;
    s.total_blocks_stored = blocks + host_blocks;
    s.unique_block_hashes = s.device_cells / config_.block_size + host_blocks;
    s.apc_active_entries = active;
    std::lock_guard lock(published_mutex_);
    published_ = std::move(s);
  }

  engine::Engine& engine_;
  const CacheConfig config_;
  BlockHasher hasher_;
  HostTier host_;
  std::int64_t holder_count_;
  std::vector<SeqId> free_holders_;
  SeqId scratch_;
  std::unordered_map<EntryId, DeviceEntry> entries_;
  std::unordered_map<std::string, RadixTree> trees_;  // by namespace digest
  std::map<SeqId, Lease> leases_;
  EntryId next_id_ = 0;
  EntryId newest_ = 0;  // the most recently donated entry: outside the idle-cell budget
  std::uint64_t next_order_ = 0;
  bool donated_since_compaction_ = false;
  CacheStats stats_;  // counters; the rest of a snapshot is derived in publish()

  mutable std::mutex published_mutex_;
  CacheStats published_;
};

PrefixCache::PrefixCache(engine::Engine& engine, CacheConfig config, std::vector<SeqId> holders, SeqId scratch)
    : impl_(std::make_unique<Impl>(engine, config, std::move(holders), scratch)) {}
PrefixCache::~PrefixCache() = default;

const CacheConfig& PrefixCache::config() const { return impl_->config(); }
bool PrefixCache::can_reuse() const { return impl_->can_reuse(); }
Acquisition PrefixCache::acquire(const RequestKey& key, std::span<const Token> prompt, SeqId seq) {
  return impl_->acquire(key, prompt, seq);
}
Acquisition PrefixCache::bypass() { return impl_->bypass(); }
void PrefixCache::advance(SeqId seq, std::int32_t computed) { impl_->advance(seq, computed); }
std::vector<Resolved> PrefixCache::poll() { return impl_->poll(); }
void PrefixCache::donate(SeqId seq, std::span<const Token> tokens) { impl_->donate(seq, tokens); }
void PrefixCache::release(SeqId seq) { impl_->release(seq); }
std::int32_t PrefixCache::locked_by(SeqId seq) const { return impl_->locked_by(seq); }
std::int64_t PrefixCache::device_cells() const { return impl_->device_cells(); }
std::int64_t PrefixCache::idle_cells() const { return impl_->idle_cells(); }
std::int64_t PrefixCache::budgeted_idle_cells() const { return impl_->budgeted_idle_cells(); }
std::string PrefixCache::verify() const { return impl_->verify(); }
std::int64_t PrefixCache::release_device_cells(std::int64_t cells) { return impl_->release_device_cells(cells); }
void PrefixCache::expire() { impl_->expire(); }
std::int64_t PrefixCache::compact() { return impl_->compact(); }
bool PrefixCache::compaction_due() const { return impl_->compaction_due(); }
ResetReport PrefixCache::reset() { return impl_->reset(); }
CacheStats PrefixCache::stats() const { return impl_->stats(); }

}  // namespace prefixd::cache
