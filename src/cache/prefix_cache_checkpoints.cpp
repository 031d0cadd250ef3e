// prefixd cache — reuse for models whose memory cannot be cut back to an earlier position
// (recurrent, hybrid, and sliding-window models without the full window cache).
//
// Such a sequence can resume only where its whole state after exactly the reused tokens exists:
// - at the end of a device entry whose holder still keeps the state after its tokens (copying the
//   holder shares its attention cells and its recurrent state), or
// - at a checkpoint (the partial state after a prefix, in the checkpoint store) once the sequence
//   also holds the attention cells before it, from the device tree or the host tier.
// Running sequences take checkpoints at planned positions (advance()); a finished sequence becomes
// a device entry with its state, and leaves a checkpoint at its end when it is demoted.
#include "cache/prefix_cache_impl.h"

namespace prefixd::cache {

namespace {
bool has_attention(const engine::Engine& engine) { return engine::has_attention_cells(engine.model()); }
}  // namespace

Acquisition PrefixCache::Impl::adopt_at_checkpoint(Lease& lease) {
  Acquisition got;
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  const std::string& ns = lease.lineage.ns;
  const Lineage& lineage = lease.lineage;
  const ScopeId& scope = lease.key.scope;
  lease.chain = hasher_.chain(lineage, lease.prompt);
  if (!can_reuse() || n < 2) return got;
  const auto query = std::span<const Token>(lease.prompt).first(static_cast<size_t>(n - 1));  // one-token guard

  // 1. An entry whose state is kept at its end, and that the prompt extends.
  RadixTree::Match whole, device;
  if (auto tree = trees_.find(ns); tree != trees_.end()) {
    whole = tree->second.match_whole(query, lease.session, lease.reach);
    device = tree->second.match(query, lease.session, lease.reach);
  }
  if (whole.length > 0 && !entries_.at(whole.entry).state_at_end) whole = {};
  // 2. A checkpoint, with the attention cells before it from the device tier, another running
  // sequence (whose cells before what it has computed are final), or the host tier.
  const bool attention = has_attention(engine_);
  const Lease* peer = nullptr;
  std::int32_t peer_reach = 0;
  if (attention) {
    for (const auto& [seq, other] : leases_) {
      if (seq == lease.seq || other.lineage.ns != ns || other.waits_for) continue;
      const std::int32_t reach = std::min(shared_with(lease, other, common_prefix(query, other.prompt)), other.computed);
      if (reach > peer_reach) {
        peer = &other;
        peer_reach = reach;
      }
    }
  }
  HostTier::Plan host_plan;
  std::int32_t limit = n - 1;
  std::int32_t host_only = 0;
  if (attention) {
    host_plan = plan_with_disk(lineage, query, device.length, 0, host_only);
    limit = std::max({device.length, peer_reach, host_plan.length});
  }
  CheckpointStore::Found checkpoint = checkpoints_.find(lineage, query, lease.chain, limit);
  const std::int32_t in_memory = std::max(whole.length, checkpoint.position);
  const bool promoted = promote_checkpoint(lineage, query, lease.chain, in_memory, limit, lease.session, scope);
  if (promoted) checkpoint = checkpoints_.find(lineage, query, lease.chain, limit);

  // 3. A window-only model: an entry whose holder still has the window before the matched length
  // is the state there, as a checkpoint would be (the window is known unbroken from window_from).
  std::int32_t window_reach = 0;
  if (window_only() && device.length > 0 &&
      window_run(entries_.at(device.entry).holder, entries_.at(device.entry).window_from) <=
          device.length - engine_.model().sliding_window + 1) {
    window_reach = device.length;
  }

  // What the context holds is adopted first; then idle cells this request does not use are
  // demoted (as for dense models), before a host restore, so the restored cells can take them.
  if (window_reach >= config_.min_prefix && window_reach > std::max(whole.length, checkpoint.position)) {
    DeviceEntry& entry = entries_.at(device.entry);
    engine_.copy_sequence(entry.holder, lease.seq, 0, window_reach);
    entry.last_used = Clock::now();
    lock(lease, window_reach);
    lease.window_from = entry.window_from;
    got = Acquisition{Outcome::partial, window_reach, Tier::device, device.in_session};
    enforce_running_budget();
  } else if (whole.length >= config_.min_prefix && whole.length >= checkpoint.position) {
    DeviceEntry& entry = entries_.at(whole.entry);
    engine_.copy_sequence(entry.holder, lease.seq, 0, whole.length);
    entry.last_used = Clock::now();
    lock(lease, whole.length);
    lease.window_from = entry.window_from;
    got = Acquisition{Outcome::hit_extend, whole.length, Tier::device, whole.in_session};
    enforce_running_budget();
  } else if (checkpoint.position >= config_.min_prefix) {
    std::int32_t from_device = attention ? std::min(device.length, checkpoint.position) : 0;
    if (attention && from_device < checkpoint.position && peer_reach >= checkpoint.position) {
      // Another request holds these cells: sharing them is free, a host restore is a copy.
      from_device = checkpoint.position;
      engine_.copy_sequence(peer->seq, lease.seq, 0, from_device);
      lock(lease, std::min(from_device, peer->locked));
      stats_.inflight_shares += 1;
      scope_counters_[scope].inflight_shares += 1;
    } else if (from_device > 0) {
      DeviceEntry& entry = entries_.at(device.entry);
      engine_.copy_sequence(entry.holder, lease.seq, 0, from_device);
      entry.last_used = Clock::now();
      lock(lease, from_device);
    }
    enforce_running_budget();
    // The demotions may have moved segments and checkpoints around (a budget can evict what was
    // planned): the plan is made again from what the tiers hold now.
    std::int32_t reach = from_device;
    if (attention) {
      host_plan = host_.plan(lineage, query, from_device);
      reach = std::max(from_device, host_plan.length);
    }
    const CheckpointStore::Found now = checkpoints_.find(lineage, query, lease.chain, attention ? reach : n - 1);
    const std::int32_t k = now.position;
    bool ok = k >= config_.min_prefix;
    if (ok && k < from_device) {
      // Resume earlier than the cells adopted: without its partial state the sequence can be cut.
      engine_.drop_checkpoint_state(lease.seq);
      engine_.remove_sequence(lease.seq, k, -1);
      lock(lease, k);
    }
    if (ok && attention && from_device < k) {
      ok = host_.restore(host_.clip(host_plan, k), lease.seq, from_device, stats_.failed_restores, pin_) >= k;
    }
    // The attention cells are in place; the checkpoint replaces the partial state they came with.
    ok = ok && engine_.restore_checkpoint(now.checkpoint->state, lease.seq);
    if (ok) {
      lease.window_from = std::min(now.checkpoint->window_from, k);
      checkpoints_.used(now.key, lease.session);
      const bool on_device = from_device >= k;
      const bool disk = (promoted && k > in_memory) || (!on_device && k > std::max(host_only, from_device));
      const bool remote = k > lease.remote_from;
      got = Acquisition{on_device ? Outcome::partial : Outcome::hit_restore, k,
                        remote ? Tier::remote : disk ? Tier::disk : (on_device ? Tier::device : Tier::host), false};
    } else {
      if (k >= config_.min_prefix) {
        stats_.failed_restores += 1;
        spdlog::warn("cache: the checkpoint at position {} could not be restored; the request runs cold", k);
        checkpoints_.erase(now.key);
      }
      unlock(lease);
      engine_.remove_sequence(lease.seq, 0, -1);
    }
  } else {
    enforce_running_budget();
  }
  checkpoints_.classify_refusal(lease.session, lineage, query, lease.chain, got.reused);
  lease.computed = got.reused;
  return got;
}

std::vector<engine::Pos> PrefixCache::Impl::checkpoint_positions(const RequestKey& key, std::int32_t n) const {
  std::vector<engine::Pos> positions(key.boundaries.begin(), key.boundaries.end());
  // The session wall: a checkpoint there is addressed as the namespace's (it does not cover the
  // fork), so every session of the namespace may resume at the end of the shared prefix.
  if (key.shared_prefix != kNoFork && key.shared_prefix > 0) positions.push_back(key.shared_prefix);
  if (config_.checkpoint_every > 0) {
    for (engine::Pos p = config_.checkpoint_every; p < n; p += config_.checkpoint_every) positions.push_back(p);
  }
  positions.push_back(n - 1);  // an identical resend feeds one token
  positions.push_back(n);      // the next turn, which extends the whole prompt, feeds only what is new
  std::ranges::sort(positions);
  const auto [first, last] = std::ranges::unique(positions);
  positions.erase(first, last);
  return positions;
}

void PrefixCache::Impl::plan_stops(Lease& lease) {
  const auto n = static_cast<std::int32_t>(lease.prompt.size());
  std::vector<engine::Pos> stops = checkpoint_positions(lease.key, n);
  // Only positions this request computes, long enough to be worth a restore, not stored already,
  // and, for a request without a session under session isolation, that anyone could reuse.
  const std::int32_t reusable = lease.reach.own ? n : lease.reach.others;
  std::erase_if(stops, [&](engine::Pos p) {
    return p <= lease.computed || p > n || p < config_.min_prefix || p > reusable ||
           checkpoints_.contains(checkpoints_.key_of(lease.lineage, lease.prompt, lease.chain, p));
  });
  lease.stops = std::move(stops);
}

void PrefixCache::Impl::donate_with_state(Lease& lease, SeqId seq, std::span<const Token> tokens) {
  unlock(lease);
  const auto n = static_cast<std::int32_t>(tokens.size());
  const std::string& ns = lease.lineage.ns;
  const Lineage& lineage = lease.lineage;
  // A request without a session under session isolation keeps nothing past the shared prefix; its
  // state cannot be cut back to it (the checkpoint there was taken during its prefill).
  const bool unreachable = !lease.reach.own && n > lease.reach.others;
  if (!can_reuse() || n < config_.min_prefix || unreachable) {
    engine_.remove_sequence(seq, 0, -1);
    enforce_device_budget();
    publish();
    return;
  }
  const bool attention = has_attention(engine_);
  EntryId superseded = 0;
  if (auto it = trees_.find(ns); it != trees_.end()) {
    if (const RadixTree::Match w = it->second.match_whole(tokens, lease.session, lease.reach); w.length > 0 && w.in_session) {
      superseded = w.entry;
    }
  }
  const bool have_holder = holder_count_ > 0 && (superseded != 0 || !free_holders_.empty() || free_a_holder(ns));
  RadixTree& tree = trees_.try_emplace(ns, config_.verify_every_operation).first->second;
  const RadixTree::Match longest = attention ? tree.match(tokens, lease.session) : RadixTree::Match{};
  // The end state is kept as a checkpoint instead of an entry when an entry holds these tokens
  // already (its cells serve them), or when no holder is free. (Under session isolation that entry
  // may be another session's, which this session's next turn cannot reuse past the shared prefix:
  // a rare loss, taken rather than a holder whose state and cells would come from two sources.)
  const engine::Pos seq_from = window_run(seq, lease.window_from);
  if (longest.length == n || !have_holder) {
    const std::vector<Digest> chain = hasher_.chain(lineage, tokens);
    keep_checkpoint(lineage, tokens, chain, engine_.save_checkpoint(seq), lease.session, CheckpointKind::sequence_end,
                    seq_from, lease.key.scope);
    remember_session(lease.key, tokens);
    engine_.remove_sequence(seq, 0, -1);
    trace("donate seq={}: state at {} kept as a checkpoint", seq, n);
    after_tree_change(ns);
    return;
  }
  // Shared in the tree means shared in the KV: the holder takes the tree's cells for the prefix it
  // shares, then this sequence's own cells and, copied last, its state (a copy shares the source's
  // whole recurrent state). The scratch sequence carries the tree's prefix in case the holder
  // is the one the new entry supersedes.
  const std::int32_t shared = longest.length;
  // A window that drops old cells: the holder's window runs unbroken from where this sequence's
  // run starts, or, when that run reaches down to the shared prefix, from where the tree holder's
  // run starts below it. Without the window before its end, the entry keeps the attention cells
  // only and its end state becomes a checkpoint.
  engine::Pos holder_from = seq_from;
  if (window_only() && shared > 0 && seq_from <= shared) {
    const engine::Pos tree_from = entries_.at(longest.entry).window_from;
    holder_from = tree_from < shared ? tree_from : shared;
  }
  // (A token at position p attends to positions p - window + 1 to p.)
  const bool state_at_end = !window_only() || holder_from <= n - engine_.model().sliding_window + 1;
  if (!state_at_end) {
    keep_checkpoint(lineage, tokens, hasher_.chain(lineage, tokens), engine_.save_checkpoint(seq), lease.session,
                    CheckpointKind::sequence_end, seq_from, lease.key.scope);
  }
  if (shared > 0) engine_.copy_sequence(entries_.at(longest.entry).holder, scratch_, 0, shared);
  SeqId holder = -1;
  if (superseded != 0) {
    holder = entries_.at(superseded).holder;
  } else {
    holder = free_holders_.back();
    free_holders_.pop_back();
  }
  engine_.remove_sequence(holder, 0, -1);
  if (shared > 0) engine_.copy_sequence(scratch_, holder, 0, shared);
  engine_.copy_sequence(seq, holder, shared, n);
  engine_.remove_sequence(scratch_, 0, -1);
  engine_.remove_sequence(seq, 0, -1);
  const EntryId id = ++next_id_;
  DeviceEntry& entry = entries_[id];
  entry = DeviceEntry{id,           lineage,      lease.session, {tokens.begin(), tokens.end()}, holder,
                      Clock::now(), state_at_end, holder_from, lease.key.scope};
  tree.insert(id, entry.tokens, entry.session);
  if (superseded != 0) {
    tree.erase(superseded);
    entries_.erase(superseded);
  }
  newest_ = id;
  trace("donate seq={}: entry {} holds {} tokens and their state in sequence {}", seq, id, n, holder);
  write_behind(lineage, entry.tokens, holder, entry.scope);
  remember_session(lease.key, entry.tokens);
  if (disk_ && entry.state_at_end) {
    checkpoint_to_disk(ns, checkpoints_.key_of(lineage, entry.tokens, hasher_.chain(lineage, entry.tokens), n), n,
                       engine_.save_checkpoint(holder), entry.window_from, entry.scope);
  }
  after_tree_change(ns);
}

void PrefixCache::Impl::refresh_window_entries() {
  if (engine_.model().family != engine::ModelFamily::sliding_window) return;
  std::vector<EntryId> broken;
  for (auto& [id, e] : entries_) {
    if (trimmable()) {
      if (!holds_its_start(e.holder, static_cast<std::int32_t>(e.tokens.size()))) broken.push_back(id);
      continue;
    }
    e.window_from = window_run(e.holder, e.window_from);
    const auto n = static_cast<engine::Pos>(e.tokens.size());
    if (e.window_from > n - engine_.model().sliding_window + 1) e.state_at_end = false;
  }
  for (EntryId id : broken) {
    DeviceEntry& e = entries_.at(id);
    const std::string ns = e.lineage.ns;
    trace("entry {} lost the start of its window cells; dropped", id);
    stats_.device_evictions += 1;
    // Running requests that locked its cells hold their own copies of them: unlock first.
    for (auto& [seq, lease] : leases_) {
      if (lease.lineage.ns == ns && lease.locked > 0) unlock(lease);
    }
    drop(e);
    repin(ns);
  }
}

void PrefixCache::Impl::checkpoint_entry_end(const DeviceEntry& e) {
  if (!e.state_at_end || trimmable()) return;
  const std::vector<Digest> chain = hasher_.chain(e.lineage, e.tokens);
  keep_checkpoint(e.lineage, e.tokens, chain, engine_.save_checkpoint(e.holder), e.session, CheckpointKind::sequence_end,
                  e.window_from, e.scope);
}

}  // namespace prefixd::cache
