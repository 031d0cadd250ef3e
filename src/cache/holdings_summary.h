// prefixd cache — the holdings ledger: which blocks each tier keeps, as block chain hashes, for a
// router that sends a request to the server already holding the longest part of its prompt (the
// summary), and for subscribers that index it from the changes (KV events, kv_events.h). How the
// hashes are found, and memoized, is described in holdings_summary.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/backing_tiers.h"
#include "cache/device_tier.h"
#include "cache/host_tier.h"
#include "cache/kv_events.h"
#include "cache/namespace_labels.h"

namespace prefixd::cache {

class HoldingsSummary {
 public:
  HoldingsSummary(const BlockHasher& hasher, const DeviceTier& device, HostTier& host, const BackingTiers& backing);
  // With `since` equal to the current version only the version comes back (unchanged); with
  // `by_medium`, each tier's blocks too: of every scope, or of `scope` alone.
  CacheSummary summary(std::optional<std::uint64_t> since, bool by_medium = false,
                       const std::optional<ScopeId>& scope = std::nullopt);

  // From now on, records the changes of the blocks of the scopes `scopes` accepts as events (the
  // first look announces everything held). An empty function turns recording off.
  void record_events(KvEventScopes scopes);
  // Looks at the tiers and returns the events since the last call, in order.
  std::vector<KvEvent> take_events();
  // Every tier was emptied (a reset of every scope): forgets what was held and records one
  // AllBlocksCleared in place of a removal of each block.
  void cleared();
  // The blocks of namespace `ns` (its digest) are computed under these LoRA adapters
  // (RequestKey::adapter): their stored events say so from now on. Kept in NamespaceLabels (with
  // a disk tier, in its directory too, so that a restart keeps them).
  void label_namespace(const std::string& ns, const std::string& adapter);

 private:
  // The blocks of one device entry or segment, and whose they are.
  struct Held {
    std::vector<Digest> blocks;
    ScopeId scope{};
    std::string adapter;  // label_namespace's label of its namespace; empty: none known
  };
  // What a new holder brings: its blocks, the tokens they cover from `first_token` on, and what the
  // first block hangs off (nullopt: the namespace root, or a session's fork).
  struct Seen {
    std::span<const engine::Token> tokens;
    std::size_t first_token = 0;
    std::optional<Digest> parent;
  };
  using SegmentMemo = std::unordered_map<Digest, Held, DigestHash>;
  using EntryMemo = std::map<std::pair<EntryId, std::size_t>, Held>;
  using Counts = std::unordered_map<Digest, std::int64_t, DigestHash>;

  // Compares the tiers with the memo, counts and records the changes.
  void refresh();
  // The host or disk tier: from the keys its store changed (`changed`), or, when nullopt, by a
  // walk of the whole store; holders that left go to `gone`.
  void refresh_segments(Medium medium, std::optional<std::vector<Digest>> changed,
                        std::vector<std::pair<Medium, Held>>& gone);
  Held segment_held(const Digest& key, const Digest& parent, engine::Pos begin, std::span<const engine::Token> tokens,
                    const ScopeId& scope, Seen& seen) const;
  // The label of the namespace a segment of `medium` hangs off, found through the segments before
  // it (a segment's parent is the key of the one before it, the namespace root at 0), `memo`'s
  // first.
  std::string segment_adapter(Medium medium, const SegmentMemo& memo, Digest parent, engine::Pos begin) const;
  void count_in(Medium medium, const Held& held, const Seen& seen);
  void count_out(Medium medium, const Held& held);
  bool recorded(const ScopeId& scope) const { return scopes_ && scopes_(scope); }
  // Empties the memo and every count; the next refresh walks every store whole.
  void forget_all();

  const BlockHasher& hasher_;
  const DeviceTier& device_;
  HostTier& host_;
  const BackingTiers& backing_;
  // Block chains per device entry (by id and length) and per segment key, in each tier.
  EntryMemo entries_;
  std::array<SegmentMemo, kMediumCount> segments_;  // [host], [disk]; [device] stays empty
  std::array<Counts, kMediumCount> in_medium_;      // how many holders of each tier list each block
  Counts in_any_;                                   // of every tier: the summary's set is the keys
  std::uint64_t version_ = 0;
  bool changed_ = false;
  bool walk_all_ = false;  // the memo was emptied: the next refresh walks every store whole
  KvEventScopes scopes_;
  std::vector<KvEvent> events_;
  NamespaceLabels labels_;  // namespace root → label_namespace's label
  // Removals found by the current refresh, per tier and scope, recorded at its end.
  std::map<std::pair<Medium, ScopeId>, std::vector<Digest>> removed_;
};

}  // namespace prefixd::cache
