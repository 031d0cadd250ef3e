#include "events/kv_event_subscriber.h"

#include <chrono>
#include <map>
#include <optional>

#include <spdlog/spdlog.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace prefixd::events {

namespace {

std::span<const std::uint8_t> bytes_of(const zmq::message_t& m) { return {m.data<std::uint8_t>(), m.size()}; }

}  // namespace

struct KvEventSubscriber::Context {
  zmq::context_t zmq{1};
};

struct KvEventSubscriber::Stream {
  std::size_t id = 0;
  SubscriberSource source;
  zmq::socket_t sub;
  std::int64_t next = 0;
};

KvEventSubscriber::KvEventSubscriber(OnBatch on_batch, OnGap on_gap)
    : on_batch_(std::move(on_batch)), on_gap_(std::move(on_gap)), context_(std::make_unique<Context>()),
      thread_([this](const std::stop_token& stop) { run(stop); }) {}

KvEventSubscriber::~KvEventSubscriber() {
  thread_.request_stop();
  thread_.join();
}

void KvEventSubscriber::add(std::size_t id, SubscriberSource source) {
  std::lock_guard lock(mutex_);
  added_.emplace_back(id, std::move(source));
}

void KvEventSubscriber::restart(std::size_t id) {
  std::lock_guard lock(mutex_);
  restarted_.push_back(id);
}

std::int64_t KvEventSubscriber::delivered() const {
  std::lock_guard lock(mutex_);
  return delivered_;
}

void KvEventSubscriber::deliver(Stream& stream, std::int64_t seq, std::span<const std::uint8_t> payload) {
  stream.next = seq + 1;
  auto batch = decode_batch(payload);
  if (!batch) {
    spdlog::warn("kv events from {}: batch {} skipped: {}", stream.source.endpoint, seq, batch.error());
    return;
  }
  on_batch_(stream.id, *batch);
  std::lock_guard lock(mutex_);
  ++delivered_;
}

bool KvEventSubscriber::replay(Stream& stream) {
  if (stream.source.replay_endpoint.empty()) return false;
  zmq::socket_t dealer(context_->zmq, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, 2000);
  dealer.connect(stream.source.replay_endpoint);
  const std::string start = sequence_frame(stream.next);
  dealer.send(zmq::const_buffer(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start), zmq::send_flags::none);
  bool covered = true;
  bool first = true;
  for (;;) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(dealer, std::back_inserter(frames)) || frames.size() != 3) return false;
    const auto seq = parse_sequence_frame(bytes_of(frames[1]));
    if (!seq || *seq == -1) break;
    if (first && *seq != stream.next) covered = false;  // the buffer no longer reaches back
    first = false;
    if (*seq >= stream.next) deliver(stream, *seq, bytes_of(frames[2]));
  }
  return covered;
}

void KvEventSubscriber::run(const std::stop_token& stop) {
  std::map<std::size_t, std::unique_ptr<Stream>> streams;
  const auto catch_up = [&](Stream& stream) {
    stream.next = 0;
    if (!replay(stream)) on_gap_(stream.id);
  };
  while (!stop.stop_requested()) {
    std::vector<std::pair<std::size_t, SubscriberSource>> added;
    std::vector<std::size_t> restarted;
    {
      std::lock_guard lock(mutex_);
      added.swap(added_);
      restarted.swap(restarted_);
    }
    for (auto& [id, source] : added) {
      auto stream = std::make_unique<Stream>(Stream{id, std::move(source), zmq::socket_t(context_->zmq, zmq::socket_type::sub), 0});
      try {
        stream->sub.set(zmq::sockopt::linger, 0);
        stream->sub.set(zmq::sockopt::subscribe, "");
        stream->sub.connect(stream->source.endpoint);
      } catch (const zmq::error_t& e) {
        spdlog::warn("kv events: cannot subscribe to {}: {}", stream->source.endpoint, e.what());
        continue;
      }
      catch_up(*stream);
      streams[id] = std::move(stream);
    }
    for (std::size_t id : restarted) {
      if (auto it = streams.find(id); it != streams.end()) catch_up(*it->second);
    }
    if (streams.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    std::vector<zmq::pollitem_t> items;
    std::vector<Stream*> order;
    for (auto& [id, stream] : streams) {
      items.push_back({stream->sub.handle(), 0, ZMQ_POLLIN, 0});
      order.push_back(stream.get());
    }
    zmq::poll(items, std::chrono::milliseconds(20));
    for (std::size_t i = 0; i < items.size(); ++i) {
      if ((items[i].revents & ZMQ_POLLIN) == 0) continue;
      Stream& stream = *order[i];
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(stream.sub, std::back_inserter(frames), zmq::recv_flags::dontwait)) continue;
      if (frames.size() != 3) continue;
      const auto seq = parse_sequence_frame(bytes_of(frames[1]));
      if (!seq || *seq < stream.next) continue;  // a duplicate of a replayed batch
      if (*seq > stream.next && !replay(stream)) on_gap_(stream.id);
      if (*seq >= stream.next) deliver(stream, *seq, bytes_of(frames[2]));
    }
  }
}

}  // namespace prefixd::events
