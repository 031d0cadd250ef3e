#include "events/kv_event_publisher.h"

#include <algorithm>
#include <chrono>
#include <format>

#include <spdlog/spdlog.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace prefixd::events {

bool endpoint_binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://");
}

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct KvEventPublisher::Sockets {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
  std::optional<zmq::socket_t> replay;
};

std::expected<std::unique_ptr<KvEventPublisher>, std::string> KvEventPublisher::start(PublisherConfig config) {
  auto sockets = std::make_unique<Sockets>();
  try {
    sockets->pub.set(zmq::sockopt::sndhwm, config.high_water_mark);
    sockets->pub.set(zmq::sockopt::linger, 1000);
    if (endpoint_binds(config.endpoint)) {
      sockets->pub.bind(config.endpoint);
    } else {
      sockets->pub.connect(config.endpoint);
    }
  } catch (const zmq::error_t& e) {
    return std::unexpected(std::format("--kv-events-endpoint {}: {}", config.endpoint, e.what()));
  }
  if (!config.replay_endpoint.empty()) {
    try {
      sockets->replay.emplace(sockets->context, zmq::socket_type::router);
      sockets->replay->set(zmq::sockopt::linger, 0);
      sockets->replay->bind(config.replay_endpoint);
    } catch (const zmq::error_t& e) {
      return std::unexpected(std::format("--kv-events-replay-endpoint {}: {}", config.replay_endpoint, e.what()));
    }
  }
  return std::unique_ptr<KvEventPublisher>(new KvEventPublisher(std::move(config), std::move(sockets)));
}

KvEventPublisher::KvEventPublisher(PublisherConfig config, std::unique_ptr<Sockets> sockets)
    : config_(std::move(config)), sockets_(std::move(sockets)), thread_([this] { run(); }) {}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

std::string KvEventPublisher::encode(const std::vector<cache::KvEvent>& events) const {
  return encode_batch(events, now_seconds(), config_.block_size, config_.hash_format);
}

void KvEventPublisher::publish(std::vector<cache::KvEvent> events) {
  if (events.empty()) return;
  std::int64_t stored = 0, removed = 0, cleared = 0;
  for (const cache::KvEvent& e : events) {
    stored += std::holds_alternative<cache::BlocksStored>(e);
    removed += std::holds_alternative<cache::BlocksRemoved>(e);
    cleared += std::holds_alternative<cache::AllBlocksCleared>(e);
  }
  std::unique_lock lock(mutex_);
  const std::int64_t seq = next_seq_++;
  ++stats_.batches;
  stats_.stored_events += stored;
  stats_.removed_events += removed;
  stats_.cleared_events += cleared;
  if (queue_.size() < config_.queue_batches) {
    queue_.emplace_back(seq, std::move(events));
    stats_.queued_batches = queue_.size();
    lock.unlock();
    ready_.notify_all();
    return;
  }
  // Full: the batch skips the live stream but keeps its number, so the gap is seen and replayed.
  ++stats_.dropped_batches;
  lock.unlock();
  keep_for_replay(seq, encode(events));
}

void KvEventPublisher::keep_for_replay(std::int64_t seq, std::string payload) {
  std::lock_guard lock(mutex_);
  const auto at = std::ranges::upper_bound(replay_, seq, {}, &std::pair<std::int64_t, std::string>::first);
  replay_.emplace(at, seq, std::move(payload));
  while (replay_.size() > config_.replay_batches) replay_.pop_front();
}

PublisherStats KvEventPublisher::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void KvEventPublisher::run() {
  const zmq::const_buffer topic = zmq::buffer(config_.topic);
  bool replay_asked = false;
  for (;;) {
    if (sockets_->replay) {
      zmq::pollitem_t item{sockets_->replay->handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, std::chrono::milliseconds(5));
        replay_asked = (item.revents & ZMQ_POLLIN) != 0;
      } catch (const zmq::error_t& e) {
        spdlog::warn("kv events: replay: {}", e.what());
      }
    }
    std::deque<std::pair<std::int64_t, std::vector<cache::KvEvent>>> batches;
    bool stop = false;
    {
      std::unique_lock lock(mutex_);
      if (!sockets_->replay) {
        ready_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopping_ || !queue_.empty(); });
      }
      batches.swap(queue_);
      stats_.queued_batches = 0;
      stop = stopping_;
    }
    for (auto& [seq, events] : batches) {
      std::string payload = encode(events);
      const std::string seq_frame = sequence_frame(seq);
      try {
        sockets_->pub.send(topic, zmq::send_flags::sndmore);
        sockets_->pub.send(zmq::buffer(seq_frame), zmq::send_flags::sndmore);
        sockets_->pub.send(zmq::buffer(payload), zmq::send_flags::none);
      } catch (const zmq::error_t& e) {
        spdlog::warn("kv events: batch {} not sent ({}); a subscriber can replay it", seq, e.what());
      }
      keep_for_replay(seq, std::move(payload));
    }
    if (stop) break;
    // After the queue: a replay covers every batch numbered before the request came.
    if (replay_asked) {
      try {
        serve_replay();
      } catch (const zmq::error_t& e) {
        spdlog::warn("kv events: replay: {}", e.what());
      }
    }
  }
}

void KvEventPublisher::serve_replay() {
  zmq::socket_t& router = *sockets_->replay;
  std::vector<zmq::message_t> frames;
  if (!zmq::recv_multipart(router, std::back_inserter(frames), zmq::recv_flags::dontwait)) return;
  // [identity, empty, first seq]
  const auto start = frames.size() == 3 ? parse_sequence_frame(std::span(frames[2].data<std::uint8_t>(), frames[2].size()))
                                        : std::nullopt;
  if (!start) {
    spdlog::warn("kv events: a replay request of {} frames is not [identity, empty, 8-byte sequence]", frames.size());
    return;
  }
  std::vector<std::pair<std::int64_t, std::string>> batches;
  {
    std::lock_guard lock(mutex_);
    ++stats_.replay_requests;
    for (const auto& [seq, payload] : replay_) {
      if (seq >= *start) batches.emplace_back(seq, payload);
    }
    stats_.replayed_batches += static_cast<std::int64_t>(batches.size());
  }
  const std::string identity(frames[0].data<char>(), frames[0].size());
  const auto send = [&](const std::string& seq, const std::string& payload) {
    router.send(zmq::buffer(identity), zmq::send_flags::sndmore);
    router.send(zmq::const_buffer(), zmq::send_flags::sndmore);
    router.send(zmq::buffer(seq), zmq::send_flags::sndmore);
    router.send(zmq::buffer(payload), zmq::send_flags::none);
  };
  for (const auto& [seq, payload] : batches) send(sequence_frame(seq), payload);
  send(sequence_frame(-1), std::string());
}

}  // namespace prefixd::events
