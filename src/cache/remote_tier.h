// prefixd cache — the shared tier: segments and checkpoints in a Valkey (or Redis) store that many
// servers loading the same model read and write.
//
// Writes are behind: the engine thread queues records (bounded in bytes; a full queue drops the
// write and counts it) and a writer thread SETs them. Reads are asynchronous: a RemoteFetch is
// queued to a reader thread, which runs it (remote_fetch.h) and signals its owner; the engine
// thread never waits for the network. Each thread has its own connection set, so a slow write
// never delays a read. Capacity and eviction are the store's (maxmemory, allkeys-lru): a value the
// store dropped is a plain miss.
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <expected>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/block_hash.h"
#include "cache/disk_format.h"
#include "cache/remote_fetch.h"

namespace prefixd::remote {
class RemoteStore;
}

namespace prefixd::cache {

struct RemoteTierConfig {
  std::vector<std::string> urls;               // redis://HOST:PORT; several are seeds of one cluster
  std::chrono::milliseconds timeout{50};       // per store call; a fetch gives up at this deadline
  std::uint64_t queue_capacity_bytes = 256ull << 20;
  std::size_t remembered_keys = 1u << 18;      // names known written, so they are not sent again
};

// What the shared tier did. Store-level counters cover both connection sets.
struct RemoteStats {
  bool enabled = false;
  bool cluster = false;
  std::int64_t fetches = 0;           // prompts looked up
  std::int64_t fetch_hits = 0;        // of which brought back at least one usable value
  std::int64_t fetch_timeouts = 0;    // lookups a request stopped waiting for (it ran without them)
  std::int64_t hits = 0;              // requests whose reused prefix reached into what the tier gave
  std::int64_t promoted_segments = 0;
  std::int64_t promoted_checkpoints = 0;
  std::int64_t bad_values = 0;        // present but unusable (corrupt, foreign, not what the name says): deleted
  std::int64_t writes = 0;            // values written
  std::int64_t write_errors = 0;
  std::int64_t writes_dropped = 0;    // the queue was full
  std::uint64_t queued_bytes = 0;
  std::uint64_t gets_hit = 0;         // store GETs that returned a value
  std::uint64_t gets_missed = 0;
  std::uint64_t errors = 0;           // store commands that failed (connection, timeout, server error)
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t fetch_latency_us_sum = 0;  // wall time of whole fetches
  std::uint64_t fetch_latency_count = 0;
};

class RemoteTier {
 public:
  // Validates the URLs; connects nothing yet. Values are named under a prefix holding the model key.
  static std::expected<std::unique_ptr<RemoteTier>, std::string> create(RemoteTierConfig config, const Digest& model);
  // Writes what is queued (each SET bounded by the timeout), then stops both threads; fetches
  // still queued complete with nothing.
  ~RemoteTier();
  RemoteTier(const RemoteTier&) = delete;
  RemoteTier& operator=(const RemoteTier&) = delete;

  const RemoteTierConfig& config() const { return config_; }
  const Digest& model() const { return model_; }

  // Whether this server wrote or read the value under `name` lately (bounded memory).
  bool known(const std::string& name) const;
  struct Write {
    std::string name;
    Record record;
  };
  // Queues values; false (counted) for those the queue cannot take now.
  bool enqueue(std::vector<Write> writes);
  // Blocks until the write queue is empty and the writer idle.
  void flush();
  void fetch(std::shared_ptr<RemoteFetch> fetch);

  // Counters the engine thread moves.
  void count_timeout();
  void count_hit();
  void count_promoted(std::int64_t segments, std::int64_t checkpoints);
  RemoteStats stats() const;

 private:
  RemoteTier(RemoteTierConfig config, const Digest& model, std::unique_ptr<remote::RemoteStore> reader,
             std::unique_ptr<remote::RemoteStore> writer);
  void remember_locked(const std::string& name);
  void reader_loop();
  void writer_loop();

  const RemoteTierConfig config_;
  const Digest model_;
  std::unique_ptr<remote::RemoteStore> reader_store_;
  std::unique_ptr<remote::RemoteStore> writer_store_;
  mutable std::mutex mutex_;
  std::condition_variable reads_ready_;
  std::condition_variable writes_ready_;
  std::condition_variable idle_;
  std::deque<std::shared_ptr<RemoteFetch>> reads_;
  std::deque<Write> writes_;
  std::uint64_t queued_bytes_ = 0;
  bool writing_ = false;
  bool stopping_ = false;
  std::list<std::string> known_order_;  // front: most recent
  std::unordered_map<std::string, std::list<std::string>::iterator> known_;
  RemoteStats stats_;
  std::thread reader_;  // last: they start after every member above exists
  std::thread writer_;
};

}  // namespace prefixd::cache
