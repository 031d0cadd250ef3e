// prefixd cache — the disk tier's store: verified record files in one directory, an index of
// their headers, a byte cap, and a bounded write-behind queue drained by its own thread.
//
// Files are content-addressed: DIR/kv/<2 hex>/<key hex>.seg (attention segments, keyed like the
// host tier's) or .ckpt (checkpoints). A write goes to DIR/tmp, is fsynced, renamed into place and
// the directory fsynced, so after a crash a file under kv/ is either whole or absent; leftovers in
// tmp/ are removed at startup. The index is rebuilt at startup from the headers alone; payloads are
// verified when read. A file that fails (truncated, corrupt, another model's, another format
// version) is counted, removed and never restored.
//
// Eviction keeps the directory within its cap: least recently used first, but never a segment
// that another indexed segment extends (leaves go before the prefixes they depend on).
// Thread-safety: every public method may be called from any thread; the engine thread never waits
// for a write (enqueue() drops a job when the queue is full and counts it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/changed_keys.h"
#include "cache/disk_format.h"
#include "cache/disk_stats.h"
#include "cache/segment_index.h"

namespace prefixd::cache {

class DiskStore final : public SegmentIndex {
 public:
  struct Options {
    std::filesystem::path dir;
    std::uint64_t capacity_bytes = 16ull << 30;
    std::uint64_t queue_capacity_bytes = 256ull << 20;
    // Records of another model key are foreign (removed at the index rebuild). nullopt (the CLI's
    // view of a directory): every model's records are indexed.
    std::optional<Digest> model;
  };
  // A batch written in order: the records of one prefix, parents first. `supersedes`: files the
  // batch makes redundant (an earlier, shorter tail of the same conversation), removed after it.
  struct Job {
    std::vector<Record> records;
    std::vector<Digest> supersedes;
  };

  // Creates the directory if needed and rebuilds the index. Throws std::runtime_error when `dir`
  // exists and is not a directory, or cannot be read.
  explicit DiskStore(Options options);
  // Writes what is queued, then stops the writer.
  ~DiskStore();
  DiskStore(const DiskStore&) = delete;
  DiskStore& operator=(const DiskStore&) = delete;

  // Indexed, or queued to be.
  bool has(const Digest& key) const;
  std::optional<RecordMeta> meta(const Digest& key) const;  // indexed files only
  // Segments whose parent is `parent` and whose first token is `first`.
  std::vector<Digest> children(const Digest& parent, engine::Token first) const override;
  std::optional<Compared> compare(const Digest& key, std::span<const engine::Token> rest) const override;
  // Segments whose parent is `parent`, whatever their first token.
  std::vector<Digest> children(const Digest& parent) const;
  // Positions at which a checkpoint of namespace `ns` is indexed.
  std::vector<engine::Pos> checkpoint_positions(const Digest& ns) const;

  // Reads and verifies a file; marks it used. A file that fails verification is removed and
  // counted; a vanished one (evicted meanwhile) is a plain miss.
  std::optional<Record> read(const Digest& key);
  // The same for several files, read by a few threads at once; results in the order of `keys`.
  // read_seconds grows by the wall time of the whole batch.
  std::vector<std::optional<Record>> read_all(std::span<const Digest> keys);
  // Asks the kernel to start reading these files now (readahead of each whole file), so the
  // reads that follow, one file after another, find their bytes arriving or in memory.
  void prefetch(std::span<const Digest> keys) const;
  // Marks files used, in the order given (give the deepest first, so a prefix ends up newer).
  void touch(std::span<const Digest> keys);
  // Queues a job; false (counted) when the queue cannot take its bytes now.
  bool enqueue(Job job);
  // Blocks until the queue is empty and the writer idle.
  void flush();
  // Removes every file (counted as `reset`); returns bytes freed.
  std::uint64_t clear();
  // Removes these indexed files (counted as `reset`) once no write is in progress; returns what
  // they held. Keys that are not indexed are skipped.
  ScopeUsage erase(std::span<const Digest> keys);
  // Removes the files of `scope`, and drops its queued jobs (counted as `reset`); returns what they
  // held.
  ScopeUsage clear_scope(const ScopeId& scope);
  // Calls `visit` with the header of every indexed segment file, under the store's lock: keep it
  // short, and call nothing of the store from it (the lock is not recursive). The holdings summary
  // (holdings_summary.cpp) and the tree view (prefix_cache_tree.cpp) use it.
  void for_each_segment(const std::function<void(const RecordMeta&)>& visit) const;
  // The keys of files indexed or removed since the last call (ChangedKeys::take; nullopt: walk
  // every segment with for_each_segment).
  std::optional<std::vector<Digest>> take_changed();
  DiskStats stats() const;
  // Files, bytes and segment tokens per scope.
  UsageByScope usage_by_scope() const;
  const std::filesystem::path& dir() const { return options_.dir; }

 private:
  struct Entry {
    RecordMeta meta;
    std::uint64_t file_bytes = 0;
    std::list<Digest>::iterator lru;
  };

  void rebuild_index();
  std::optional<Record> read_verified(const Digest& key);  // read() without the timing
  void writer_loop();
  void write_job(Job& job);
  bool write_file(const Record& record, std::uint64_t& file_bytes);
  // Under the lock.
  void index_locked(RecordMeta meta, std::uint64_t file_bytes);
  // `key` by value: callers pass keys that live in lru_, whose node this removal frees.
  void remove_locked(Digest key, DiskRemoval reason);
  bool make_room_locked(std::uint64_t incoming);
  std::filesystem::path file_of(const Digest& key, RecordKind kind) const;

  const Options options_;
  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable idle_;
  std::deque<Job> queue_;
  std::unordered_set<Digest, DigestHash> queued_;
  bool writing_ = false;
  bool stopping_ = false;
  std::list<Digest> lru_;  // front: most recently used
  std::unordered_map<Digest, Entry, DigestHash> entries_;
  ChangedKeys changed_;  // entries_ keys indexed or removed since the holdings ledger last looked
  std::unordered_map<Digest, std::int32_t, DigestHash> child_count_;  // segments indexed per parent
  std::multimap<std::pair<Digest, engine::Token>, Digest> by_branch_;
  std::map<Digest, std::multiset<engine::Pos>> checkpoint_positions_;
  UsageByScope by_scope_;
  std::uint64_t temp_counter_ = 0;
  DiskStats stats_;
  std::thread writer_;  // last: starts after every member above exists
};

}  // namespace prefixd::cache
