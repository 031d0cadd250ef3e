#include "remote/remote_store.h"

#include <map>

#include <spdlog/spdlog.h>

#include "remote/hash_slot.h"

namespace prefixd::remote {
namespace {

bool is_redirection(const NodeReply& reply) {
  return reply.kind == NodeReply::Kind::error && (reply.text.starts_with("MOVED ") || reply.text.starts_with("ASK "));
}

// A scope that adds its wall time to the latency counters.
class LatencyScope {
 public:
  explicit LatencyScope(RemoteCounterSink& sink) : sink_(sink), start_(std::chrono::steady_clock::now()) {}
  ~LatencyScope() {
    const auto elapsed = std::chrono::steady_clock::now() - start_;
    sink_.add_latency_us(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count()));
  }
  LatencyScope(const LatencyScope&) = delete;
  LatencyScope& operator=(const LatencyScope&) = delete;

 private:
  RemoteCounterSink& sink_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::expected<std::unique_ptr<RemoteStore>, std::string> RemoteStore::create(RemoteStoreConfig config) {
  if (config.seed_urls.empty()) return std::unexpected("the remote store needs at least one redis://HOST:PORT");
  if (config.timeout.count() <= 0) return std::unexpected("the remote store timeout must be positive");
  if (config.backoff.initial.count() <= 0 || config.backoff.max < config.backoff.initial) {
    return std::unexpected("the remote store backoff must be positive, and its maximum at least its initial value");
  }
  std::vector<RemoteEndpoint> seeds;
  for (const auto& url : config.seed_urls) {
    auto endpoint = parse_remote_url(url);
    if (!endpoint) return std::unexpected(endpoint.error());
    seeds.push_back(std::move(*endpoint));
  }
  return std::unique_ptr<RemoteStore>(new RemoteStore(std::move(config), std::move(seeds)));
}

RemoteStore::RemoteStore(RemoteStoreConfig config, std::vector<RemoteEndpoint> seeds)
    : config_(std::move(config)), seed_count_(seeds.size()), slot_owner_(kClusterSlots, -1) {
  for (auto& seed : seeds) nodes_.push_back(std::make_unique<NodeConnection>(std::move(seed), config_.timeout, config_.backoff, counters_));
  if (config_.cluster_mode == ClusterMode::standalone) cluster_ = false;
  if (config_.cluster_mode == ClusterMode::cluster) cluster_ = true;
}

bool RemoteStore::cluster_enabled() const {
  std::lock_guard lock(mutex_);
  return cluster_.value_or(false);
}

std::size_t RemoteStore::node_index(const RemoteEndpoint& endpoint) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->endpoint() == endpoint) return i;
  }
  nodes_.push_back(std::make_unique<NodeConnection>(endpoint, config_.timeout, config_.backoff, counters_));
  return nodes_.size() - 1;
}

bool RemoteStore::load_slot_map(NodeConnection& node) {
  auto replies = node.pipeline({{"CLUSTER", "SLOTS"}});
  if (!replies) return false;
  const auto& reply = replies->front();
  if (reply.kind != NodeReply::Kind::array) {
    cluster_ = false;  // "ERR This instance has cluster support disabled"
    return true;
  }
  cluster_ = true;
  // Each entry: [first slot, last slot, [host, port, id...] (the primary), replicas...].
  for (const auto& range : reply.elements) {
    if (range.elements.size() < 3 || range.elements[0].kind != NodeReply::Kind::integer ||
        range.elements[1].kind != NodeReply::Kind::integer || range.elements[2].elements.size() < 2) {
      continue;
    }
    const auto& primary = range.elements[2].elements;
    RemoteEndpoint endpoint{primary[0].text, static_cast<int>(primary[1].integer)};
    if (endpoint.host.empty()) endpoint.host = node.endpoint().host;  // the node's own address
    const auto index = static_cast<int>(node_index(endpoint));
    const auto first = std::clamp<long long>(range.elements[0].integer, 0, kClusterSlots - 1);
    const auto last = std::clamp<long long>(range.elements[1].integer, 0, kClusterSlots - 1);
    for (auto slot = first; slot <= last; ++slot) slot_owner_[static_cast<std::size_t>(slot)] = index;
  }
  return true;
}

void RemoteStore::ensure_topology() {
  if (cluster_.has_value()) return;
  for (std::size_t i = 0; i < seed_count_ && !cluster_.has_value(); ++i) load_slot_map(*nodes_[i]);
}

std::size_t RemoteStore::route(std::string_view full_key) {
  ensure_topology();
  if (cluster_.value_or(false)) {
    const int owner = slot_owner_[static_cast<std::size_t>(key_hash_slot(full_key))];
    if (owner >= 0) return static_cast<std::size_t>(owner);
  }
  return 0;  // standalone, undetected, or a slot not learned yet: the first seed (MOVED corrects)
}

std::optional<NodeReply> RemoteStore::follow_redirection(const NodeReply& reply, const Command& command,
                                                         std::string_view key) {
  // "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>".
  const bool moved = reply.text.starts_with("MOVED ");
  const auto space = reply.text.rfind(' ');
  auto target = parse_node_address(std::string_view(reply.text).substr(space + 1));
  if (!target) {
    spdlog::warn("remote store: unreadable redirection '{}'", reply.text);
    return std::nullopt;
  }
  if (target->host.empty()) target->host = nodes_[route(key)]->endpoint().host;
  counters_.add_redirection();
  const auto index = node_index(*target);
  if (moved) {
    slot_owner_[static_cast<std::size_t>(key_hash_slot(key))] = static_cast<int>(index);
    cluster_ = true;
    auto replies = nodes_[index]->pipeline({command});
    if (!replies) return std::nullopt;
    return std::move(replies->front());
  }
  // ASK: this one command goes to the importing node, preceded by ASKING; the map is unchanged.
  auto replies = nodes_[index]->pipeline({{"ASKING"}, command});
  if (!replies) return std::nullopt;
  return std::move(replies->back());
}

std::optional<NodeReply> RemoteStore::execute(const Command& command, std::string_view key) {
  auto replies = nodes_[route(key)]->pipeline({command});
  if (!replies) return std::nullopt;
  auto reply = std::move(replies->front());
  if (is_redirection(reply)) return follow_redirection(reply, command, key);
  return reply;
}

std::optional<std::string> RemoteStore::get(std::string_view key) {
  const std::string one(key);
  return std::move(get_many(std::span(&one, 1)).front());
}

std::vector<std::optional<NodeReply>> RemoteStore::pipelined(const std::string& verb,
                                                              std::span<const std::string> keys) {
  std::vector<std::optional<NodeReply>> results(keys.size());
  std::vector<std::string> full_keys;
  full_keys.reserve(keys.size());
  std::map<std::size_t, std::vector<std::size_t>> by_node;  // node index -> positions in keys
  for (std::size_t i = 0; i < keys.size(); ++i) {
    full_keys.push_back(config_.key_prefix + keys[i]);
    by_node[route(full_keys.back())].push_back(i);
  }
  for (const auto& [node, positions] : by_node) {
    std::vector<Command> commands;
    commands.reserve(positions.size());
    for (auto position : positions) commands.push_back({verb, full_keys[position]});
    auto replies = nodes_[node]->pipeline(commands);
    if (!replies) continue;
    for (std::size_t j = 0; j < positions.size(); ++j) {
      if (is_redirection((*replies)[j])) {
        results[positions[j]] = follow_redirection((*replies)[j], commands[j], full_keys[positions[j]]);
      } else {
        results[positions[j]] = std::move((*replies)[j]);
      }
    }
  }
  return results;
}

std::vector<std::optional<std::string>> RemoteStore::get_many(std::span<const std::string> keys) {
  LatencyScope latency(counters_);
  std::lock_guard lock(mutex_);
  std::vector<std::optional<std::string>> results(keys.size());
  const auto replies = pipelined("GET", keys);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& reply = replies[i];
    if (reply && reply->kind == NodeReply::Kind::value) {
      counters_.add_hits(1);
      counters_.add_bytes_read(reply->text.size());
      results[i] = std::move(reply->text);
      continue;
    }
    counters_.add_misses(1);
    if (!reply || reply->kind != NodeReply::Kind::nil) counters_.add_errors(1);
  }
  return results;
}

std::vector<bool> RemoteStore::exists_many(std::span<const std::string> keys) {
  LatencyScope latency(counters_);
  std::lock_guard lock(mutex_);
  std::vector<bool> results(keys.size(), false);
  const auto replies = pipelined("EXISTS", keys);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& reply = replies[i];
    if (reply && reply->kind == NodeReply::Kind::integer) {
      results[i] = reply->integer > 0;
    } else {
      counters_.add_errors(1);
    }
  }
  return results;
}

bool RemoteStore::set(std::string_view key, std::string_view value) {
  LatencyScope latency(counters_);
  std::lock_guard lock(mutex_);
  const std::string full_key = config_.key_prefix + std::string(key);
  const auto reply = execute({"SET", full_key, std::string(value)}, full_key);
  if (!reply || reply->kind != NodeReply::Kind::status) {
    counters_.add_errors(1);
    return false;
  }
  counters_.add_bytes_written(value.size());
  return true;
}

bool RemoteStore::del(std::string_view key) {
  LatencyScope latency(counters_);
  std::lock_guard lock(mutex_);
  const std::string full_key = config_.key_prefix + std::string(key);
  const auto reply = execute({"DEL", full_key}, full_key);
  if (!reply || reply->kind != NodeReply::Kind::integer) {
    counters_.add_errors(1);
    return false;
  }
  return true;
}

}  // namespace prefixd::remote
