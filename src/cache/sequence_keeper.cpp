#include "cache/sequence_keeper.h"

#include <algorithm>

#include "cache/trace.h"

namespace prefixd::cache {

using engine::SeqId;
using engine::Token;
using Clock = DeviceClock;

SequenceKeeper::SequenceKeeper(const Tiers& tiers, DeviceBudget& budget) : tiers_(tiers), budget_(budget) {}

SequenceKeeper::Kept SequenceKeeper::keep_cells(Lease& lease, SeqId seq, std::span<const Token> tokens) {
  const std::int32_t canonical = lease.locked;  // positions already holding the tree's cells
  unlock(tiers_.device, lease);
  // A request without a session under session isolation keeps only the shared prefix: nobody could
  // ever reuse the rest.
  if (!lease.reach.own) tokens = tokens.first(std::min<size_t>(tokens.size(), static_cast<size_t>(lease.reach.others)));
  const auto n = static_cast<std::int32_t>(tokens.size());
  const std::string& ns = lease.lineage.ns;
  if (!tiers_.config.enabled || n < tiers_.config.min_prefix || tiers_.device.holder_count() == 0 || !tiers_.device.holds_its_start(seq, n)) {
    tiers_.engine.remove_sequence(seq, 0, -1);
    return {};
  }
  // Cells are shared by content, whoever's entry holds them; but an entry of another session
  // covers this one only when the session could reuse it (session isolation).
  const RadixTree::Match longest = tiers_.device.match(ns, tokens, lease.session);
  if (const RadixTree::Match reachable = tiers_.device.match(ns, tokens, lease.session, lease.reach); reachable.length == n) {
    tiers_.device.entry(reachable.entry).last_used = Clock::now();
    tiers_.engine.remove_sequence(seq, 0, -1);
    trace(tiers_.config, "donate seq={}: covered by entry {}", seq, reachable.entry);
    return Kept{.tree_changed = true};
  }
  // Shared in the tree means shared in the KV: the prefix this sequence has in common with the
  // tree takes the tree's cells (unless they already are the tree's: locked when adopted). With a
  // stream per sequence no cells are shared: the sequence keeps its own.
  if (longest.length > canonical && tiers_.family.shares_cells()) {
    tiers_.engine.remove_sequence(seq, 0, longest.length);
    tiers_.engine.copy_sequence(tiers_.device.entry(longest.entry).holder, seq, 0, longest.length);
  }
  // The same session's entry that this sequence extends (the previous turn) gives its holder.
  EntryId superseded = 0;
  if (const RadixTree::Match whole = tiers_.device.match_whole(ns, tokens, lease.session, lease.reach);
      whole.length > 0 && whole.in_session) {
    superseded = whole.entry;
  }
  SeqId holder = -1;
  if (superseded != 0) {
    holder = tiers_.device.entry(superseded).holder;
  } else if (!tiers_.device.holder_free() && !budget_.free_a_holder(ns)) {
    tiers_.engine.remove_sequence(seq, 0, -1);
    trace(tiers_.config, "donate seq={}: every holder is in use by locked entries; dropped", seq);
    return Kept{.tree_changed = true};
  } else {
    holder = tiers_.device.take_holder();
  }
  // Everything the superseded entry held lies inside [0, longest.length) of `seq` now.
  tiers_.engine.remove_sequence(holder, 0, -1);
  tiers_.engine.copy_sequence(seq, holder, 0, n);
  tiers_.engine.remove_sequence(seq, 0, -1);
  DeviceEntry added{0, lease.lineage, lease.session, {tokens.begin(), tokens.end()}, holder, Clock::now()};
  added.scope = lease.key.scope;
  added.prompt_length = std::min(n, static_cast<std::int32_t>(lease.prompt.size()));
  const DeviceEntry& entry = tiers_.device.add(std::move(added), superseded);
  const EntryId id = entry.id;
  trace(tiers_.config, "donate seq={}: entry {} holds {} tokens in sequence {}", seq, id, n, holder);
  return Kept{.tree_changed = true, .entry = id};
}

SequenceKeeper::Kept SequenceKeeper::keep_state(Lease& lease, SeqId seq, std::span<const Token> tokens) {
  unlock(tiers_.device, lease);
  const auto n = static_cast<std::int32_t>(tokens.size());
  const std::string& ns = lease.lineage.ns;
  const Lineage& lineage = lease.lineage;
  // A request without a session under session isolation keeps nothing past the shared prefix; its
  // state cannot be cut back to it (the checkpoint there was taken during its prefill).
  const bool unreachable = !lease.reach.own && n > lease.reach.others;
  if (!tiers_.config.enabled || n < tiers_.config.min_prefix || unreachable) {
    tiers_.engine.remove_sequence(seq, 0, -1);
    return {};
  }
  const bool attention = tiers_.family.keeps_cells();
  EntryId superseded = 0;
  if (const RadixTree::Match w = tiers_.device.match_whole(ns, tokens, lease.session, lease.reach);
      w.length > 0 && w.in_session) {
    superseded = w.entry;
  }
  const bool have_holder =
      tiers_.device.holder_count() > 0 && (superseded != 0 || tiers_.device.holder_free() || budget_.free_a_holder(ns));
  const RadixTree::Match longest = attention ? tiers_.device.match(ns, tokens, lease.session) : RadixTree::Match{};
  // The end state is kept as a checkpoint instead of an entry when an entry holds these tokens
  // already (its cells serve them), or when no holder is free. (Under session isolation that entry
  // may be another session's, which this session's next turn cannot reuse past the shared prefix:
  // a rare loss, taken rather than a holder whose state and cells would come from two sources.)
  const engine::Pos seq_from = tiers_.device.window_run(seq, lease.window_from);
  if (longest.length == n || !have_holder) {
    const std::vector<Digest> chain = tiers_.hasher.chain(lineage, tokens);
    tiers_.backing.keep_checkpoint(lineage, tokens, chain, tiers_.engine.save_checkpoint(seq), lease.session, CheckpointKind::sequence_end,
                    seq_from, lease.key.scope);
    tiers_.engine.remove_sequence(seq, 0, -1);
    trace(tiers_.config, "donate seq={}: state at {} kept as a checkpoint", seq, n);
    return Kept{.tree_changed = true};
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
  if (tiers_.family.keeps_only_window() && shared > 0 && seq_from <= shared) {
    const engine::Pos tree_from = tiers_.device.entry(longest.entry).window_from;
    holder_from = tree_from < shared ? tree_from : shared;
  }
  // (A token at position p attends to positions p - window + 1 to p.)
  const bool state_at_end = tiers_.family.window_intact(holder_from, n);
  if (!state_at_end) {
    tiers_.backing.keep_checkpoint(lineage, tokens, tiers_.hasher.chain(lineage, tokens), tiers_.engine.save_checkpoint(seq), lease.session,
                    CheckpointKind::sequence_end, seq_from, lease.key.scope);
  }
  const SeqId scratch = tiers_.device.scratch();
  if (shared > 0) tiers_.engine.copy_sequence(tiers_.device.entry(longest.entry).holder, scratch, 0, shared);
  const SeqId holder = superseded != 0 ? tiers_.device.entry(superseded).holder : tiers_.device.take_holder();
  tiers_.engine.remove_sequence(holder, 0, -1);
  if (shared > 0) tiers_.engine.copy_sequence(scratch, holder, 0, shared);
  tiers_.engine.copy_sequence(seq, holder, shared, n);
  tiers_.engine.remove_sequence(scratch, 0, -1);
  tiers_.engine.remove_sequence(seq, 0, -1);
  // The holder now owns every window cell the sequence computed (and the tree's, for the shared
  // prefix): far more than the window cache has room for once requests share them. It keeps the
  // window at its end only (DeviceTier::keep_only_window says why).
  if (tiers_.family.keeps_only_window()) {
    tiers_.device.keep_only_window(holder, n);
    holder_from = std::max(holder_from, tiers_.device.kept_window_from(n));
  }
  const DeviceEntry& entry =
      tiers_.device.add(DeviceEntry{0, lineage, lease.session, {tokens.begin(), tokens.end()}, holder, Clock::now(),
                              state_at_end, holder_from, lease.key.scope},
                  superseded);
  const EntryId id = entry.id;
  trace(tiers_.config, "donate seq={}: entry {} holds {} tokens and their state in sequence {}", seq, id, n, holder);
  tiers_.backing.write_behind(lineage, entry.tokens, holder, entry.scope);
  if (tiers_.backing.disk() != nullptr && entry.state_at_end) {
    tiers_.backing.checkpoint_behind(ns, tiers_.checkpoints.key_of(lineage, entry.tokens, tiers_.hasher.chain(lineage, entry.tokens), n), n,
                       tiers_.engine.save_checkpoint(holder), entry.window_from, entry.scope);
  }
  return Kept{.tree_changed = true, .entry = id};
}

}  // namespace prefixd::cache
