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
  if (const RadixTree::Match w = device_.match_whole(ns, tokens, lease.session, lease.reach);
      w.length > 0 && w.in_session) {
    superseded = w.entry;
  }
  const bool have_holder =
      device_.holder_count() > 0 && (superseded != 0 || device_.holder_free() || free_a_holder(ns));
  const RadixTree::Match longest = attention ? device_.match(ns, tokens, lease.session) : RadixTree::Match{};
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
    const engine::Pos tree_from = device_.entry(longest.entry).window_from;
    holder_from = tree_from < shared ? tree_from : shared;
  }
  // (A token at position p attends to positions p - window + 1 to p.)
  const bool state_at_end = !window_only() || holder_from <= n - engine_.model().sliding_window + 1;
  if (!state_at_end) {
    keep_checkpoint(lineage, tokens, hasher_.chain(lineage, tokens), engine_.save_checkpoint(seq), lease.session,
                    CheckpointKind::sequence_end, seq_from, lease.key.scope);
  }
  const SeqId scratch = device_.scratch();
  if (shared > 0) engine_.copy_sequence(device_.entry(longest.entry).holder, scratch, 0, shared);
  const SeqId holder = superseded != 0 ? device_.entry(superseded).holder : device_.take_holder();
  engine_.remove_sequence(holder, 0, -1);
  if (shared > 0) engine_.copy_sequence(scratch, holder, 0, shared);
  engine_.copy_sequence(seq, holder, shared, n);
  engine_.remove_sequence(scratch, 0, -1);
  engine_.remove_sequence(seq, 0, -1);
  const DeviceEntry& entry =
      device_.add(DeviceEntry{0, lineage, lease.session, {tokens.begin(), tokens.end()}, holder, Clock::now(),
                              state_at_end, holder_from, lease.key.scope},
                  superseded);
  const EntryId id = entry.id;
  trace("donate seq={}: entry {} holds {} tokens and their state in sequence {}", seq, id, n, holder);
  backing_.write_behind(lineage, entry.tokens, holder, entry.scope);
  remember_session(lease.key, entry.tokens);
  if (backing_.disk() != nullptr && entry.state_at_end) {
    backing_.checkpoint_behind(ns, checkpoints_.key_of(lineage, entry.tokens, hasher_.chain(lineage, entry.tokens), n), n,
                       engine_.save_checkpoint(holder), entry.window_from, entry.scope);
  }
  after_tree_change(ns);
}

void PrefixCache::Impl::refresh_window_entries() {
  if (engine_.model().family != engine::ModelFamily::sliding_window) return;
  std::vector<EntryId> broken;
  for (const auto& [id, entry] : device_.entries()) {
    DeviceEntry& e = device_.entry(id);  // updated in place; no entry is added or removed here
    if (trimmable()) {
      if (!holds_its_start(e.holder, static_cast<std::int32_t>(e.tokens.size()))) broken.push_back(id);
      continue;
    }
    e.window_from = window_run(e.holder, e.window_from);
    const auto n = static_cast<engine::Pos>(e.tokens.size());
    if (e.window_from > n - engine_.model().sliding_window + 1) e.state_at_end = false;
  }
  for (EntryId id : broken) {
    DeviceEntry& e = device_.entry(id);
    const std::string ns = e.lineage.ns;
    trace("entry {} lost the start of its window cells; dropped", id);
    stats_.device_evictions += 1;
    // Running requests that locked its cells hold their own copies of them: unlock first.
    for (auto& [seq, lease] : leases_) {
      if (lease.lineage.ns == ns && lease.locked > 0) unlock(lease);
    }
    device_.drop(e);
    repin(ns);
  }
}

void PrefixCache::Impl::checkpoint_entry_end(const DeviceEntry& e) {
  if (!e.state_at_end || trimmable()) return;
  const std::vector<Digest> chain = hasher_.chain(e.lineage, e.tokens);
  keep_checkpoint(e.lineage, e.tokens, chain, engine_.save_checkpoint(e.holder), e.session, CheckpointKind::sequence_end,
                  e.window_from, e.scope);
}

HostTier::Plan PrefixCache::Impl::plan_with_disk(const Lineage& lineage, std::span<const Token> query,
                                                std::int32_t on_device, std::int32_t beat, std::int32_t& host_only) {
  HostStore::Evicted evicted;
  HostTier::Plan plan = backing_.plan_with_disk(lineage, query, on_device, beat, host_only, evicted);
  add_evictions(evicted);
  return plan;
}

bool PrefixCache::Impl::keep_checkpoint(const Lineage& lineage, std::span<const Token> prefix,
                                        std::span<const Digest> chain, engine::Bytes state, const std::string& session,
                                        CheckpointKind kind, engine::Pos window_from, const ScopeId& scope) {
  const auto position = static_cast<engine::Pos>(prefix.size());
  backing_.checkpoint_behind(lineage.ns, checkpoints_.key_of(lineage, prefix, chain, position), position, state,
                             window_from, scope);
  return checkpoints_.save(lineage, prefix, chain, std::move(state), session, kind, window_from, scope);
}

}  // namespace prefixd::cache
