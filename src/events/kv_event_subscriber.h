// prefixd events — a KV event subscriber: follows several publishers' streams (one SUB socket
// each), in order, asking a publisher's replay socket for any batch it missed.
//
// Per source: batches are delivered in sequence order from the first one the publisher still
// buffers. A new source (or one restarted) is caught up through the replay socket from batch 0.
// A gap the replay cannot fill (the source has no replay socket, or its buffer no longer reaches
// back) is reported with on_gap, then delivery goes on from what arrived: the owner rebuilds its
// view some other way (the router fetches the server's block list). A live batch numbered below
// the next one expected is a duplicate of a replayed one and is skipped; a restarted publisher
// numbers from 0 again, so its owner calls restart() when it learns of it.
// Thread-safety: add() and restart() may be called from any thread; the callbacks run on the
// subscriber's thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "events/kv_event_wire.h"

namespace prefixd::events {

struct SubscriberSource {
  std::string endpoint;         // the publisher's PUB address to connect to
  std::string replay_endpoint;  // its ROUTER address; empty: none
};

class KvEventSubscriber {
 public:
  using OnBatch = std::function<void(std::size_t source, const WireBatch& batch)>;
  using OnGap = std::function<void(std::size_t source)>;
  KvEventSubscriber(OnBatch on_batch, OnGap on_gap);
  ~KvEventSubscriber();
  KvEventSubscriber(const KvEventSubscriber&) = delete;
  KvEventSubscriber& operator=(const KvEventSubscriber&) = delete;

  // Follows `source` under the number `id` (replacing what `id` followed); caught up from batch 0.
  void add(std::size_t id, SubscriberSource source);
  // The publisher of `id` restarted: expect its numbers from 0 again, caught up through its replay.
  void restart(std::size_t id);
  // Sources followed, and batches delivered, so far (for tests and logs).
  std::int64_t delivered() const;

 private:
  struct Stream;
  void run(const std::stop_token& stop);
  // Delivers what `stream`'s replay socket has from its next number on; false when it does not
  // start there (or there is no replay socket).
  bool replay(Stream& stream);
  void deliver(Stream& stream, std::int64_t seq, std::span<const std::uint8_t> payload);

  OnBatch on_batch_;
  OnGap on_gap_;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::size_t, SubscriberSource>> added_;  // for the thread to connect
  std::vector<std::size_t> restarted_;
  std::int64_t delivered_ = 0;
  struct Context;
  std::unique_ptr<Context> context_;
  std::jthread thread_;  // last
};

}  // namespace prefixd::events
