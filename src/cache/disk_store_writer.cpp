// prefixd cache — the disk tier's writer: the thread that drains the write-behind queue, one job
// (the records of one prefix, parents first) at a time, each file written to tmp/, fsynced and
// renamed into place (see disk_store.h).
#include <algorithm>
#include <chrono>
#include <cstring>

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "cache/disk_store.h"
#include "cache/file_io.h"

namespace prefixd::cache {
namespace fs = std::filesystem;

namespace {

std::uint64_t unix_ms_now() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace

void DiskStore::writer_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and everything queued is written
    Job job = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    write_job(job);
    lock.lock();
    for (const Record& r : job.records) {
      queued_.erase(r.meta.key);
      const std::uint64_t bytes = r.payload.size() + kRecordHeaderBytes + r.meta.tokens.size() * 4;
      stats_.queue_bytes -= std::min(stats_.queue_bytes, bytes);
    }
    writing_ = false;
    idle_.notify_all();
  }
  writing_ = false;
  idle_.notify_all();
}

void DiskStore::write_job(Job& job) {
  std::vector<Digest> written;
  for (const Record& record : job.records) {
    const std::uint64_t bytes = kRecordHeaderBytes + record.meta.tokens.size() * 4 + record.payload.size();
    {
      std::lock_guard lock(mutex_);
      if (entries_.contains(record.meta.key)) {
        written.push_back(record.meta.key);
        continue;
      }
      if (!make_room_locked(bytes)) break;  // larger than the whole cap
    }
    std::uint64_t file_bytes = 0;
    if (!write_file(record, file_bytes)) break;  // what follows extends it: useless without it
    std::lock_guard lock(mutex_);
    index_locked(record.meta, file_bytes);
    stats_.writes += 1;
    stats_.write_bytes += file_bytes;
    written.push_back(record.meta.key);
  }
  std::lock_guard lock(mutex_);
  // Deepest first, so each prefix ends up more recently used than what extends it.
  for (auto key = written.rbegin(); key != written.rend(); ++key) {
    if (auto it = entries_.find(*key); it != entries_.end()) lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  if (written.size() == job.records.size()) {
    for (const Digest& key : job.supersedes) {
      if (std::ranges::find(written, key) == written.end()) remove_locked(key, DiskRemoval::superseded);
    }
  }
}

bool DiskStore::write_file(const Record& record, std::uint64_t& file_bytes) {
  RecordMeta meta = record.meta;
  if (meta.created_unix_ms == 0) meta.created_unix_ms = unix_ms_now();
  const engine::Bytes header = encode_header(meta, record.payload);
  const fs::path final_path = file_of(meta.key, meta.kind);
  fs::path temp;
  {
    std::lock_guard lock(mutex_);
    temp = options_.dir / "tmp" / (to_hex(meta.key) + "." + std::to_string(::getpid()) + "." + std::to_string(++temp_counter_));
  }
  if (const auto failure = write_atomically(temp, final_path, {header, record.payload})) {
    std::lock_guard lock(mutex_);
    stats_.write_errors += 1;
    // Every error at first, then at powers of two: a full disk must not flood the log.
    if ((stats_.write_errors & (stats_.write_errors - 1)) == 0) {
      spdlog::warn("cache: disk tier write failed at {} ({}); {} failures so far, the cache keeps serving from memory",
                   failure->step, std::strerror(failure->error), stats_.write_errors);
    }
    return false;
  }
  file_bytes = header.size() + record.payload.size();
  return true;
}

}  // namespace prefixd::cache
