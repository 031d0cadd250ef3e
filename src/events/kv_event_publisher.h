// prefixd events — the KV event publisher: batches of cache events out on a ZeroMQ PUB socket in
// vLLM's wire format (kv_event_wire.h), with a ROUTER socket that replays recent batches to a
// subscriber that missed some.
//
// The engine thread hands each batch to publish(), which never waits for the network: it numbers
// the batch and queues it for the publisher's thread, which encodes and sends it and keeps it for
// replay. When the queue is full the batch is not sent live (counted as dropped) but still goes
// into the replay buffer under its number, so a subscriber sees the gap in the sequence numbers
// and asks for it. A PUB socket itself drops messages for a subscriber past its high-water mark;
// the replay covers those the same way.
//
// Replay: a client (DEALER, or REQ for one answer at a time) sends [empty frame, first sequence
// number as 8 bytes big-endian]; it receives [empty, seq, payload] for every buffered batch from
// that number on, then [empty, -1 as 8 bytes, empty payload].
// Thread-safety: publish() and stats() may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <expected>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cache/kv_events.h"
#include "events/kv_event_wire.h"

namespace prefixd::events {

// vLLM's convention for an event endpoint: a stable side binds, a volatile one connects. True for
// an address with a wildcard host (`*`, `::`) or an ipc:// or inproc:// one: bind there.
bool endpoint_binds(const std::string& endpoint);

struct PublisherConfig {
  // Where the PUB socket binds (an address with a wildcard host, `*` or `::`, or an ipc:// or
  // inproc:// one) or connects (any other, e.g. a forwarder's tcp://host:port).
  std::string endpoint;
  std::string replay_endpoint;  // the ROUTER socket's bind address; empty: no replay
  std::string topic;            // the first frame of every message
  HashFormat hash_format = HashFormat::integer;
  std::int32_t block_size = 16;
  std::size_t queue_batches = 10000;   // batches waiting for the thread
  std::size_t replay_batches = 10000;  // batches kept for replay
  int high_water_mark = 100000;        // messages the PUB socket queues per subscriber
};

struct PublisherStats {
  std::int64_t batches = 0;          // numbered (sent live or dropped)
  std::int64_t stored_events = 0;    // BlockStored events in them
  std::int64_t removed_events = 0;
  std::int64_t cleared_events = 0;
  std::int64_t dropped_batches = 0;  // not sent live because the queue was full (replayable)
  std::int64_t replay_requests = 0;
  std::int64_t replayed_batches = 0;
  std::size_t queued_batches = 0;
};

class KvEventPublisher {
 public:
  // Binds (or connects) the sockets; an address ZeroMQ refuses or cannot bind is an error that
  // names it.
  static std::expected<std::unique_ptr<KvEventPublisher>, std::string> start(PublisherConfig config);
  // Sends what is queued, then stops the thread and closes the sockets.
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  void publish(std::vector<cache::KvEvent> events);
  PublisherStats stats() const;
  const PublisherConfig& config() const { return config_; }

 private:
  struct Sockets;
  KvEventPublisher(PublisherConfig config, std::unique_ptr<Sockets> sockets);
  void run();
  void serve_replay();
  // Keeps an encoded batch for replay, in sequence order, within the buffer's bound.
  void keep_for_replay(std::int64_t seq, std::string payload);
  std::string encode(const std::vector<cache::KvEvent>& events) const;

  const PublisherConfig config_;
  std::unique_ptr<Sockets> sockets_;  // used by the thread only, once it runs
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::pair<std::int64_t, std::vector<cache::KvEvent>>> queue_;
  std::deque<std::pair<std::int64_t, std::string>> replay_;
  std::int64_t next_seq_ = 0;
  PublisherStats stats_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace prefixd::events
