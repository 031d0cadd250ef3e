#include "cache/remote_tier.h"

#include <spdlog/spdlog.h>

#include "remote/remote_store.h"

namespace prefixd::cache {
namespace {

std::uint64_t record_bytes(const Record& record) {
  return record.payload.size() + record.meta.tokens.size() * sizeof(engine::Token) + kRecordHeaderBytes;
}

std::string encode_value(const Record& record) {
  const engine::Bytes header = encode_header(record.meta, record.payload);
  std::string value;
  value.reserve(header.size() + record.payload.size());
  value.append(reinterpret_cast<const char*>(header.data()), header.size());
  value.append(reinterpret_cast<const char*>(record.payload.data()), record.payload.size());
  return value;
}

}  // namespace

std::expected<std::unique_ptr<RemoteTier>, std::string> RemoteTier::create(RemoteTierConfig config,
                                                                           const Digest& model) {
  remote::RemoteStoreConfig store;
  store.seed_urls = config.urls;
  store.timeout = config.timeout;
  // One namespace per model key (fingerprint and context settings): models never read each other.
  store.key_prefix = "prefixd:v" + std::to_string(kDiskFormatVersion) + ":" + to_hex(model) + ":";
  auto reader = remote::RemoteStore::create(store);
  if (!reader) return std::unexpected(reader.error());
  auto writer = remote::RemoteStore::create(store);
  if (!writer) return std::unexpected(writer.error());
  return std::unique_ptr<RemoteTier>(new RemoteTier(std::move(config), model, std::move(*reader), std::move(*writer)));
}

RemoteTier::RemoteTier(RemoteTierConfig config, const Digest& model, std::unique_ptr<remote::RemoteStore> reader,
                       std::unique_ptr<remote::RemoteStore> writer)
    : config_(std::move(config)), model_(model), reader_store_(std::move(reader)), writer_store_(std::move(writer)) {
  stats_.enabled = true;
  reader_ = std::thread([this] { reader_loop(); });
  writer_ = std::thread([this] { writer_loop(); });
}

RemoteTier::~RemoteTier() {
  flush();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  reads_ready_.notify_all();
  writes_ready_.notify_all();
  reader_.join();
  writer_.join();
  // Fetches nobody ran: their owners stop waiting.
  for (auto& fetch : reads_) fetch->complete({});
}

bool RemoteTier::known(const std::string& name) const {
  std::lock_guard lock(mutex_);
  return known_.contains(name);
}

void RemoteTier::remember_locked(const std::string& name) {
  if (auto it = known_.find(name); it != known_.end()) {
    known_order_.splice(known_order_.begin(), known_order_, it->second);
    return;
  }
  known_order_.push_front(name);
  known_[name] = known_order_.begin();
  while (known_.size() > config_.remembered_keys) {
    known_.erase(known_order_.back());
    known_order_.pop_back();
  }
}

bool RemoteTier::enqueue(std::vector<Write> writes) {
  bool all = true;
  {
    std::lock_guard lock(mutex_);
    for (Write& write : writes) {
      const std::uint64_t bytes = record_bytes(write.record);
      if (known_.contains(write.name)) continue;
      if (queued_bytes_ + bytes > config_.queue_capacity_bytes) {
        stats_.writes_dropped += 1;
        all = false;
        continue;
      }
      queued_bytes_ += bytes;
      // Remembered now, so a donation that follows before the write does not queue it again.
      remember_locked(write.name);
      writes_.push_back(std::move(write));
    }
  }
  writes_ready_.notify_one();
  return all;
}

void RemoteTier::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return writes_.empty() && !writing_; });
}

void RemoteTier::fetch(std::shared_ptr<RemoteFetch> fetch) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      fetch->complete({});
      return;
    }
    stats_.fetches += 1;
    reads_.push_back(std::move(fetch));
  }
  reads_ready_.notify_one();
}

void RemoteTier::reader_loop() {
  while (true) {
    std::shared_ptr<RemoteFetch> fetch;
    {
      std::unique_lock lock(mutex_);
      reads_ready_.wait(lock, [this] { return stopping_ || !reads_.empty(); });
      if (stopping_) return;
      fetch = std::move(reads_.front());
      reads_.pop_front();
    }
    const auto start = std::chrono::steady_clock::now();
    RemoteFetchResult result;
    // A request whose deadline passed while it was queued runs without the tier.
    if (start < fetch->deadline()) result = run_remote_fetch(*reader_store_, fetch->plan());
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
    const bool cluster = reader_store_->cluster_enabled();
    {
      std::lock_guard lock(mutex_);
      stats_.cluster = cluster;
      stats_.fetch_latency_us_sum += static_cast<std::uint64_t>(us.count());
      stats_.fetch_latency_count += 1;
      stats_.bad_values += result.bad_values;
      if (!result.segments.empty() || result.checkpoint) stats_.fetch_hits += 1;
      for (const std::string& name : result.names) remember_locked(name);
    }
    fetch->complete(std::move(result));
  }
}

void RemoteTier::writer_loop() {
  while (true) {
    Write write;
    {
      std::unique_lock lock(mutex_);
      writes_ready_.wait(lock, [this] { return stopping_ || !writes_.empty(); });
      if (writes_.empty()) return;  // stopping, and everything is written
      write = std::move(writes_.front());
      writes_.pop_front();
      writing_ = true;
    }
    const std::uint64_t bytes = record_bytes(write.record);
    const bool ok = writer_store_->set(write.name, encode_value(write.record));
    const bool cluster = writer_store_->cluster_enabled();
    {
      std::lock_guard lock(mutex_);
      stats_.cluster = stats_.cluster || cluster;
      queued_bytes_ -= bytes;
      writing_ = false;
      if (ok) {
        stats_.writes += 1;
      } else {
        stats_.write_errors += 1;
        // Not there after all: a later donation may try again.
        if (auto it = known_.find(write.name); it != known_.end()) {
          known_order_.erase(it->second);
          known_.erase(it);
        }
      }
    }
    idle_.notify_all();
  }
}

void RemoteTier::count_timeout() {
  std::lock_guard lock(mutex_);
  stats_.fetch_timeouts += 1;
}

void RemoteTier::count_hit() {
  std::lock_guard lock(mutex_);
  stats_.hits += 1;
}

void RemoteTier::count_promoted(std::int64_t segments, std::int64_t checkpoints) {
  std::lock_guard lock(mutex_);
  stats_.promoted_segments += segments;
  stats_.promoted_checkpoints += checkpoints;
}

RemoteStats RemoteTier::stats() const {
  RemoteStats out;
  {
    std::lock_guard lock(mutex_);
    out = stats_;
    out.queued_bytes = queued_bytes_;
  }
  const remote::RemoteCounters r = reader_store_->counters();
  const remote::RemoteCounters w = writer_store_->counters();
  out.gets_hit = r.hits + w.hits;
  out.gets_missed = r.misses + w.misses;
  out.errors = r.errors + w.errors;
  out.bytes_read = r.bytes_read + w.bytes_read;
  out.bytes_written = r.bytes_written + w.bytes_written;
  return out;
}

}  // namespace prefixd::cache
