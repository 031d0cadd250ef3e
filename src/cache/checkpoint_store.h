// prefixd cache — checkpoints: the partial state of a sequence (recurrent state, or the cells of a
// sliding window that drops old ones) after exactly the tokens of one prefix.
//
// A model whose memory cannot be cut back to an earlier position resumes a prompt only at a
// position where such a state was saved; the attention K/V before it comes from the device or
// host tier like any other prefix. A checkpoint is addressed by the content it ends: the digest of
// its namespace and every token before its position (the block chain, then the partial block), so
// a checkpoint at the end of a shared system prompt serves every session of the namespace, and a
// prompt that differs anywhere before the position can never find it.
//
// Sessions keep a bounded chain of the checkpoints their requests made; a checkpoint no session
// keeps any more is dropped, and the store as a whole is LRU within a byte and count budget.
// REQUIRES: used from the engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/block_hash.h"
#include "cache/cache_types.h"
#include "cache/scope.h"
#include "engine/types.h"

namespace prefixd::cache {

// Why a checkpoint was taken, which decides how long a session keeps it.
enum class CheckpointKind {
  boundary,      // a turn boundary or a periodic position: kept for edits of later turns
  prompt_end,    // a prompt's last positions: serve its resend or next turn; supersede older ends
  sequence_end,  // the end of a kept sequence (reply, warm-up): a guess at the next turn
};

struct Checkpoint {
  std::string ns;
  engine::Pos position = 0;  // the state after tokens [0, position)
  engine::Bytes state;
  std::chrono::steady_clock::time_point last_used;
  // Window-only sliding-window models: the state's window cells are known to run unbroken from
  // here to `position` (0 otherwise).
  engine::Pos window_from = 0;
  ScopeId scope{};
};

// Why a session's checkpoint that would have served a request further was not used.
enum class Refusal { diverged, evicted, ns };
inline constexpr int kRefusalCount = 3;
const char* refusal_name(Refusal refusal);

class CheckpointStore {
 public:
  struct Found {
    Digest key{};
    engine::Pos position = 0;  // 0: nothing found
    const Checkpoint* checkpoint = nullptr;
  };

  CheckpointStore(const BlockHasher& hasher, std::uint64_t capacity_bytes, std::int64_t max_entries,
                  std::int32_t per_session);

  // The key of the state after tokens [0, position) of `tokens` in `lineage` (chain:
  // hasher.chain(lineage, them)): a position past the lineage's fork is addressed under its salt.
  Digest key_of(const Lineage& lineage, std::span<const engine::Token> tokens, std::span<const Digest> chain,
                engine::Pos position) const;

  bool contains(const Digest& key) const { return entries_.contains(key); }
  // Stores the state after `prefix` (all of its tokens) for `session`; a state the store holds
  // already is only touched and added to the session's chain. An end (prompt or sequence) serves a
  // request that resends or extends exactly that prefix, so it leaves the session's chain once the
  // session computes a prompt further along the same prefix (more than one token further: a
  // prompt's last two positions are a pair). Returns false when it does not fit.
  bool save(const Lineage& lineage, std::span<const engine::Token> prefix, std::span<const Digest> chain,
            engine::Bytes state, const std::string& session, CheckpointKind kind, engine::Pos window_from = 0,
            const ScopeId& scope = {});
  // The checkpoint at the highest position in (0, limit] whose prefix equals the query's.
  Found find(const Lineage& lineage, std::span<const engine::Token> query, std::span<const Digest> chain,
             engine::Pos limit) const;
  // Marks a checkpoint used (LRU), counts a restore, and adds it to `session`'s chain.
  void used(const Digest& key, const std::string& session);
  void erase(const Digest& key);
  // Erases these checkpoints and the session chain links naming them (no refusal will count them
  // as evicted); returns what they held.
  ScopeUsage discard(std::span<const Digest> keys);
  // Positions of namespace `ns` that hold at least one checkpoint, ascending.
  std::vector<engine::Pos> positions(const std::string& ns) const;
  // For a request of `session` that reused up to `reused`: the cause, if any, that kept a longer
  // checkpoint of the session's chain from serving it (counted).
  std::optional<Refusal> classify_refusal(const std::string& session, const Lineage& lineage,
                                          std::span<const engine::Token> query, std::span<const Digest> chain,
                                          engine::Pos reused);
  void expire(std::chrono::steady_clock::time_point older_than);
  // Checkpoints a live retention needs (retention.h): eviction passes over them while any other
  // checkpoint can go, the TTL does not end them, and they outlive the session chains naming them.
  using Retained = std::function<bool(const Digest& key)>;
  void set_retained(Retained retained) { retained_ = std::move(retained); }
  std::uint64_t clear();  // returns bytes freed
  // Erases every checkpoint of `scope` (and the chain links naming them); returns what it held.
  ScopeUsage clear_scope(const ScopeId& scope);
  const UsageByScope& usage_by_scope() const { return by_scope_; }

  std::uint64_t bytes() const { return bytes_; }
  std::size_t size() const { return entries_.size(); }
  std::uint64_t capacity() const { return capacity_bytes_; }
  std::int64_t max_entries() const { return max_entries_; }
  std::size_t sessions() const { return chains_.size(); }
  // Its part of a stats snapshot: the counters it keeps, with its holdings and budgets now.
  CheckpointStats stats() const {
    CheckpointStats out = counted_;
    out.entries = static_cast<std::int64_t>(size());
    out.bytes = bytes();
    out.capacity_bytes = capacity();
    out.max_entries = max_entries();
    out.sessions = static_cast<std::int64_t>(sessions());
    return out;
  }
  // "" when the byte and count totals, LRU list, position index and session counts agree.
  std::string verify() const;

 private:
  using Lru = std::list<Digest>;  // front: most recently used
  struct Slot {
    Checkpoint checkpoint;
    Lru::iterator lru;
  };
  // A named session's chain: the checkpoints its requests saved or restored, oldest first. A key
  // may outlive its checkpoint (evicted): a request that then cannot resume counts as `evicted`.
  struct Link {
    Digest key;
    std::string ns;
    engine::Pos position;
    bool end;  // a prompt or sequence end (see save)
  };
  using Chain = std::vector<Link>;

  void remove(const Digest& key);
  void touch(const Digest& key);
  // The least recently used checkpoint no retention needs, else the least recently used.
  // REQUIRES: the store is not empty.
  const Digest& victim() const;
  // Adds `key` to the session's chain, drops the tail links the new prefix extends, then the
  // oldest links past the bound.
  void keep_in_chain(const std::string& session, const Digest& key, const Lineage& lineage, engine::Pos position,
                     CheckpointKind kind, std::span<const engine::Token> prefix = {}, std::span<const Digest> chain = {});
  void unlink(const Digest& key);
  // Drops every chain link naming one of `keys`.
  void forget_links(const std::unordered_set<Digest, DigestHash>& keys);
  void evict_lru_for(std::uint64_t incoming);

  const BlockHasher& hasher_;
  std::uint64_t capacity_bytes_;
  std::int64_t max_entries_;
  std::int32_t per_session_;
  std::uint64_t bytes_ = 0;
  Lru lru_;
  Retained retained_;
  std::unordered_map<Digest, Slot, DigestHash> entries_;
  // Positions that hold at least one checkpoint, per namespace, with how many: a lookup hashes the
  // query only at those.
  std::unordered_map<std::string, std::map<engine::Pos, std::int32_t>> positions_;
  std::unordered_map<std::string, Chain> chains_;  // by session ("" for anonymous requests)
  std::unordered_map<Digest, std::int32_t, DigestHash> links_;  // chain links naming each key
  CheckpointStats counted_;  // the counters only; stats() adds the holdings and budgets
  UsageByScope by_scope_;
};

}  // namespace prefixd::cache
