// prefixd remote — a key-value client for a shared cache tier on Valkey (or any server speaking
// the Redis protocol), standalone or Valkey Cluster.
//
// The component owns: parsing the seed URLs, one connection per node, the cluster slot map and
// its redirections (MOVED, ASK), deadlines, backoff after failures, and counters. It knows
// nothing of the cache, of KV layouts, of llama.h or of HTTP: keys and values are bytes, and the
// caller chooses the key prefix (the model fingerprint) that keeps models apart.
//
// Failure model: no call throws for a network or server problem and none blocks for longer than
// the timeout per node it contacts (plus one more for a followed redirection). A failed read is a
// miss, a failed write returns false; both count as errors.
#pragma once

#include <chrono>
#include <expected>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "remote/node_connection.h"
#include "remote/remote_counters.h"
#include "remote/remote_endpoint.h"

namespace prefixd::remote {

enum class ClusterMode {
  detect,      // ask the first reachable seed CLUSTER SLOTS: an error reply means standalone
  standalone,  // every key goes to the first seed
  cluster,     // route by hash slot; the slot map starts empty (everything to a seed) and is
               // learned from MOVED redirections
};

struct RemoteStoreConfig {
  std::vector<std::string> seed_urls;         // redis://HOST:PORT, at least one
  std::chrono::milliseconds timeout{50};      // connect and each command, per node
  std::string key_prefix;                     // prepended to every key (hash tags are not added)
  ClusterMode cluster_mode = ClusterMode::detect;
  Backoff backoff;                            // after a node fails, how long it is left alone
};

// Thread-safe: calls are serialized by one mutex (hiredis connections are single-threaded), so a
// caller may wait behind another call's timeout.
class RemoteStore {
 public:
  // Validates the configuration (URLs, a positive timeout); connects nothing yet.
  static std::expected<std::unique_ptr<RemoteStore>, std::string> create(RemoteStoreConfig config);

  std::optional<std::string> get(std::string_view key);
  // One result per key, in order. One pipelined round trip per node the keys map to.
  std::vector<std::optional<std::string>> get_many(std::span<const std::string> keys);
  // Whether each key is present (one pipelined EXISTS per node); false for a failed node too
  // (counted as an error). Hits and misses count GETs only.
  std::vector<bool> exists_many(std::span<const std::string> keys);
  bool set(std::string_view key, std::string_view value);
  // True when the server answered (whether or not the key existed).
  bool del(std::string_view key);

  RemoteCounters counters() const { return counters_.snapshot(); }
  // Whether keys are routed by slot: the configured mode, or what detection found (false until
  // a seed answered).
  bool cluster_enabled() const;

 private:
  explicit RemoteStore(RemoteStoreConfig config, std::vector<RemoteEndpoint> seeds);

  // REQUIRES: mutex_ held (all private members below).
  void ensure_topology();
  bool load_slot_map(NodeConnection& node);
  std::size_t node_index(const RemoteEndpoint& endpoint);
  std::size_t route(std::string_view full_key);
  // Follows one MOVED or ASK reply for `command` (on `key`): updates the slot map for MOVED and
  // sends the command once to the named node. Returns the reply or nullopt when that node failed.
  std::optional<NodeReply> follow_redirection(const NodeReply& reply, const Command& command, std::string_view key);
  // `verb KEY` for every key, pipelined per node, each redirection followed once; nullopt where
  // the node failed.
  std::vector<std::optional<NodeReply>> pipelined(const std::string& verb, std::span<const std::string> keys);
  // Runs one command on the node owning `key`, following one redirection.
  std::optional<NodeReply> execute(const Command& command, std::string_view key);

  RemoteStoreConfig config_;
  RemoteCounterSink counters_;  // before nodes_: the connections hold a reference to it
  std::size_t seed_count_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<NodeConnection>> nodes_;  // seeds first, then nodes learned later
  std::optional<bool> cluster_;                         // unset until detection succeeded
  std::vector<int> slot_owner_;                         // slot -> index in nodes_, -1 when unknown
};

}  // namespace prefixd::remote
