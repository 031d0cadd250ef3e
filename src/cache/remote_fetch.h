// prefixd cache — reading one prompt's prefix from the shared tier.
//
// The engine thread plans (PrefixCache::Impl::plan_remote): which values could take the prompt
// past what the local tiers hold, and what each must contain. A reader thread runs the plan
// against the store (run_remote_fetch), verifying every value before it is kept; the engine
// thread then adopts what came back into the host tier and the checkpoint store. The plan carries
// everything the reader needs, so the reader never touches the cache's state.
//
// Value names under the store's key prefix (which holds the model key, so models never meet):
//   s:<hex key>     a whole grid segment, under its host-tier key (the chain hash at its end);
//   t:<hex index>   a shorter segment (a tail, or a session wall's segment), under tail_index();
//   c:<hex key>     a checkpoint, under its record key (checkpoint_record_key).
// A value is a disk-tier record (disk_format.h): header, token ids, payload, both checksums.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/block_hash.h"
#include "cache/disk_format.h"

namespace prefixd::remote {
class RemoteStore;
}

namespace prefixd::cache {

std::string remote_segment_name(const Digest& key);
std::string remote_tail_name(const Digest& index);
std::string remote_checkpoint_name(const Digest& record_key);
// Where a segment shorter than the grid is found: the chain hash of its first block from its
// parent, which a reader computes from the prompt at the grid line where whole segments stop.
// Tails of one conversation share it, so a longer one replaces a shorter one; a branch that
// diverges within the first block is another name. nullopt for a segment shorter than one block
// (not shared).
std::optional<Digest> tail_index(const BlockHasher& hasher, const Digest& parent, std::span<const engine::Token> tokens);

struct RemoteFetchPlan {
  BlockHasher hasher{HashAlgorithm::blake3, 16};
  Digest model{};
  std::int32_t segment_tokens = 256;
  std::vector<engine::Token> query;     // the prompt positions a reuse may cover
  // Attention segments: grid segments from `start` on, each with its key and the parent it must
  // hang off; at each grid line, the parents a shorter segment there may hang off (its own
  // lineage's, and before a fork also the unforked one, capped at the fork).
  bool segments = false;
  std::int32_t start = 0;
  std::vector<Digest> grid_keys;
  std::vector<Digest> grid_parents;
  struct TailParent {
    Digest parent;
    std::int32_t cap;  // at most this many tokens may be taken from a segment hanging off it
  };
  std::vector<std::vector<TailParent>> tail_parents;  // by grid line from `start`
  std::int32_t local_reach = 0;          // positions the local tiers rebuild (attention)
  // Checkpoint families: candidate positions (ascending) and the record key each would have.
  struct CheckpointCandidate {
    engine::Pos position = 0;
    Digest record_key{};
  };
  std::vector<CheckpointCandidate> checkpoints;
  // When the request stops waiting: --cache-remote-timeout-ms, or longer when computing the tokens
  // the lookup could bring would take longer than that (large values take time to transfer, and
  // waiting for them is worth it up to what recomputing them costs).
  std::chrono::steady_clock::time_point deadline;
};

struct RemoteFetchResult {
  std::vector<Record> segments;     // verified, in position order; the last may be taken in part
  std::optional<Record> checkpoint; // verified
  std::int32_t reach = 0;           // positions the local tiers and these segments rebuild
  std::int64_t bad_values = 0;      // present but unusable: deleted from the store
  std::vector<std::string> names;   // of the values kept (the server need not write them again)
};

// Runs a plan against the store. Never throws for a store or value problem: what cannot be read
// or verified is left out (a bad value is deleted and counted).
RemoteFetchResult run_remote_fetch(remote::RemoteStore& store, const RemoteFetchPlan& plan);

// One request's fetch, shared by the engine thread (which planned it and waits for it) and the
// reader thread (which fills `result` and then sets done).
class RemoteFetch {
 public:
  RemoteFetch(RemoteFetchPlan plan, std::function<void()> on_done)
      : plan_(std::move(plan)), on_done_(std::move(on_done)) {}

  const RemoteFetchPlan& plan() const { return plan_; }
  bool done() const { return done_.load(std::memory_order_acquire); }
  // The result, moved out (once). REQUIRES: done().
  RemoteFetchResult take_result() { return std::move(result_); }
  std::chrono::steady_clock::time_point deadline() const { return plan_.deadline; }

  // The reader thread: stores the result, marks it done, then calls on_done.
  void complete(RemoteFetchResult result) {
    result_ = std::move(result);
    done_.store(true, std::memory_order_release);
    if (on_done_) on_done_();
  }

 private:
  RemoteFetchPlan plan_;
  std::function<void()> on_done_;
  RemoteFetchResult result_;
  std::atomic<bool> done_{false};
};

}  // namespace prefixd::cache
