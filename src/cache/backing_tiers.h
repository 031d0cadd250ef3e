// prefixd cache — the tiers behind host RAM, as a request's life sees them: the disk tier and
// the shared tier (either may be absent).
//
// Writes are behind: records are serialized on the engine thread and written by each tier's own
// thread; a full queue drops the job (counted), so the engine thread never waits for a disk or a
// network. Reads promote: the disk files and shared-tier values a lookup reaches are verified and
// adopted into the host tier (segments) or the checkpoint store, and the reuse planner restores
// from there. The model key (the loaded model and its runtime settings) names every record and
// artifact this server writes and is checked on every one it reads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cache/cache_types.h"
#include "cache/checkpoint_store.h"
#include "cache/disk_store.h"
#include "cache/family.h"
#include "cache/host_tier.h"
#include "cache/remote_tier.h"
#include "cache/request_key.h"

namespace prefixd::cache {

class BackingTiers {
 public:
  // Opens the disk tier when `config` names a path and the shared tier when it names URLs (throws
  // std::invalid_argument for a bad URL); `host` and `checkpoints` receive what reads promote and
  // must outlive this object.
  BackingTiers(const engine::Engine& engine, const Family& family, const CacheConfig& config, const BlockHasher& hasher,
               HostTier& host, CheckpointStore& checkpoints);
  BackingTiers(const BackingTiers&) = delete;
  BackingTiers& operator=(const BackingTiers&) = delete;

  DiskStore* disk() const { return disk_.get(); }
  RemoteTier* remote() const { return remote_.get(); }
  const Digest& model_key() const { return model_key_; }
  std::int64_t promoted_segments() const { return promoted_segments_; }
  std::int64_t promoted_checkpoints() const { return promoted_checkpoints_; }

  // Queues the attention segments of positions [0, tokens.size()) of `holder` that the disk or
  // the shared tier lacks, and the session wall's segment (HostTier::wall_cut).
  void write_behind(const Lineage& lineage, std::span<const engine::Token> tokens, engine::SeqId holder,
                    const ScopeId& scope);
  // Stores a checkpoint in the checkpoint store and queues it behind (checkpoint_behind).
  bool keep_checkpoint(const Lineage& lineage, std::span<const engine::Token> prefix, std::span<const Digest> chain,
                       engine::Bytes state, const std::string& session, CheckpointKind kind, engine::Pos window_from,
                       const ScopeId& scope);
  // Queues a checkpoint's state under the checkpoint store's `key` for it.
  void checkpoint_behind(const std::string& ns, const Digest& key, engine::Pos position,
                         std::span<const std::uint8_t> state, engine::Pos window_from, const ScopeId& scope);

  // A disk file that continues a host plan: read and promoted only when a request adopts it.
  struct DiskSegment {
    Digest key, parent;
    std::int32_t begin = 0, take = 0;  // of the file's tokens, the first `take` serve the query
  };
  struct DiskExtension {
    std::vector<DiskSegment> files;  // in position order, past the host plan's leading segments
    std::int32_t reach = 0;          // positions [0, reach) with the host tier's segments
  };
  // A restore's whole plan, from one walk (walk_path) of the host tier and, `with_disk`, the disk's
  // index: the host tier's segments of `query` from the last grid line at or before `on_device`
  // (the cells a device source gives), and the disk's files among and after them that take it
  // further, to at least min_prefix tokens (what every restoring source offers).
  struct RestorePlan {
    HostTier::Plan host;
    DiskExtension disk;
  };
  RestorePlan plan_restore(const Lineage& lineage, std::span<const engine::Token> query, std::int32_t on_device,
                           bool with_disk) const;
  // Reads, verifies and adopts `extension`'s files into the host tier, in position order, up to
  // the first that fails; returns the host tier's plan of `query` afterwards. `evicted`: what the
  // promotions pushed out of the host tier.
  HostTier::Plan promote(const Lineage& lineage, std::span<const engine::Token> query, std::int32_t on_device,
                         const HostTier::Plan& plan, const DiskExtension& extension, HostStore::Evicted& evicted);
  // Positions in (have, limit] of `query` whose checkpoint the disk holds and the store does not,
  // at least min_prefix, highest first.
  std::vector<engine::Pos> disk_checkpoints(const Lineage& lineage, std::span<const engine::Token> query,
                                           std::span<const Digest> chain, std::int32_t have, std::int32_t limit) const;
  // Promotes the highest of disk_checkpoints() that reads back whole into the checkpoint store.
  bool promote_checkpoint(const Lineage& lineage, std::span<const engine::Token> query, std::span<const Digest> chain,
                          std::int32_t have, std::int32_t limit, const std::string& session, const ScopeId& scope);
  // Promotes the disk's checkpoint of `query` at `position`; false when it does not read back whole.
  bool promote_checkpoint_at(const Lineage& lineage, std::span<const engine::Token> query,
                             std::span<const Digest> chain, engine::Pos position, const std::string& session,
                             const ScopeId& scope);
  // The shared tier's lookup of `query`, started on its reader thread: the values that could take
  // the prompt past what the local tiers hold (`held`), on the host tier's grid and, for checkpoint
  // families, at `checkpoint_positions`. Its deadline: the tier's timeout, or as long as computing
  // what it could bring would take (`seconds_per_token`). nullptr: nothing to look up.
  std::shared_ptr<RemoteFetch> fetch(const Lineage& lineage, std::span<const engine::Token> query,
                                     const HeldPrefix& held, std::span<const engine::Pos> checkpoint_positions,
                                     double seconds_per_token, std::function<void()> on_done);
  // A done shared-tier fetch for `query`: its verified values adopted into the host tier and the
  // checkpoint store. Returns the position past which they serve (kNoFork: nothing adopted).
  std::int32_t adopt_fetched(RemoteFetch& fetch, const Lineage& lineage, std::span<const engine::Token> query,
                             const std::string& session, const ScopeId& scope, HostStore::Evicted& evicted);

  void flush_disk() {
    if (disk_) disk_->flush();
  }

 private:
  // A segment leaving the host tier: to disk unless it is there.
  void spill(const Digest& key, const HostSegment& segment);
  void remote_write(std::vector<RemoteTier::Write> writes);
  // A record's name in the shared tier (nullopt: not shared, or no shared tier).
  std::optional<std::string> remote_name_of(const Record& record) const;

  const Family& family_;
  const CacheConfig& config_;
  const BlockHasher& hasher_;
  HostTier& host_;
  CheckpointStore& checkpoints_;
  Digest model_key_{};
  std::unique_ptr<DiskStore> disk_;     // null without a disk path
  std::unique_ptr<RemoteTier> remote_;  // null without a shared tier
  std::int64_t promoted_segments_ = 0;
  std::int64_t promoted_checkpoints_ = 0;
};

}  // namespace prefixd::cache
