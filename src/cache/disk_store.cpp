#include "cache/disk_store.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "cache/disk_directory.h"
#include "cache/file_io.h"
#include "util/progress_log.h"

namespace prefixd::cache {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

DiskRemoval removal_for(RecordFault fault) {
  switch (fault) {
    case RecordFault::truncated: return DiskRemoval::truncated;
    case RecordFault::version: return DiskRemoval::version;
    case RecordFault::foreign: return DiskRemoval::foreign;
    default: return DiskRemoval::checksum;
  }
}

}  // namespace

const char* disk_removal_name(DiskRemoval reason) {
  static constexpr std::array<const char*, kDiskRemovalCount> kNames = {
      "capacity", "superseded", "checksum", "truncated", "foreign", "version", "incomplete", "reset", "gc"};
  return kNames.at(static_cast<size_t>(reason));
}

DiskStore::DiskStore(Options options) : options_(std::move(options)) {
  std::error_code ec;
  if (fs::exists(options_.dir, ec) && !fs::is_directory(options_.dir, ec)) {
    throw std::runtime_error("cache disk path " + options_.dir.string() + " exists and is not a directory");
  }
  fs::create_directories(options_.dir / "kv", ec);
  if (ec) spdlog::warn("cache: disk tier {}: {}; files there are read but none can be written", options_.dir.string(), ec.message());
  fs::create_directories(options_.dir / "tmp", ec);
  stats_.enabled = true;
  stats_.path = options_.dir.string();
  stats_.capacity_bytes = options_.capacity_bytes;
  stats_.queue_capacity_bytes = options_.queue_capacity_bytes;
  rebuild_index();
  writer_ = std::thread([this] { writer_loop(); });
}

DiskStore::~DiskStore() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  if (writer_.joinable()) writer_.join();
}

fs::path DiskStore::file_of(const Digest& key, RecordKind kind) const { return record_path(options_.dir, key, kind); }

void DiskStore::rebuild_index() {
  const auto started = Clock::now();
  std::error_code ec;
  for (auto it = fs::directory_iterator(options_.dir / "tmp", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (fs::remove(it->path(), ec)) stats_.removed[static_cast<size_t>(DiskRemoval::incomplete)] += 1;
  }
  std::vector<DiskFile> found;
  const Digest* model = options_.model ? &*options_.model : nullptr;
  std::optional<util::ProgressLog> progress;
  const auto report = [&](std::size_t read, std::size_t found) {
    if (!progress) progress.emplace("cache: reading the disk tier's headers", "files", static_cast<double>(found));
    progress->update(static_cast<double>(read));
  };
  for (DiskFile& file : list_disk_files(options_.dir, model, report)) {
    if (file.header.fault != RecordFault::none) {
      spdlog::warn("cache: disk file {} is not usable ({}); removed", file.path.string(), record_fault_name(file.header.fault));
      fs::remove(file.path, ec);
      stats_.removed[static_cast<size_t>(removal_for(file.header.fault))] += 1;
      continue;
    }
    found.push_back(std::move(file));
  }
  std::ranges::sort(found, [](const DiskFile& a, const DiskFile& b) { return a.last_use < b.last_use; });
  std::lock_guard lock(mutex_);
  for (DiskFile& f : found) index_locked(std::move(f.header.meta), f.bytes);  // the newest ends at the front
  make_room_locked(0);  // the cap may have been lowered since the files were written
  spdlog::info("cache: disk tier {}: {} files, {} MiB of {} MiB, indexed in {} ms", options_.dir.string(),
               entries_.size(), stats_.bytes >> 20, options_.capacity_bytes >> 20,
               std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
}

void DiskStore::index_locked(RecordMeta meta, std::uint64_t file_bytes) {
  const Digest key = meta.key;
  if (entries_.contains(key)) remove_locked(key, DiskRemoval::superseded);
  lru_.push_front(key);
  if (meta.kind == RecordKind::segment) {
    child_count_[meta.parent] += 1;
    if (!meta.tokens.empty()) by_branch_.emplace(std::pair{meta.parent, meta.tokens.front()}, key);
    stats_.segments += 1;
    stats_.tokens += static_cast<std::int64_t>(meta.tokens.size());
  } else {
    checkpoint_positions_[meta.ns].insert(meta.begin);
    stats_.checkpoints += 1;
  }
  stats_.bytes += file_bytes;
  by_scope_[meta.scope].add(file_bytes, meta.kind == RecordKind::segment ? static_cast<std::int64_t>(meta.tokens.size()) : 0);
  entries_.emplace(key, Entry{std::move(meta), file_bytes, lru_.begin()});
  changed_.touched(key);
}

void DiskStore::remove_locked(Digest key, DiskRemoval reason) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  const RecordMeta& meta = it->second.meta;
  std::error_code ec;
  fs::remove(file_of(key, meta.kind), ec);
  if (meta.kind == RecordKind::segment) {
    if (auto parent = child_count_.find(meta.parent); parent != child_count_.end() && --parent->second <= 0) {
      child_count_.erase(parent);
    }
    if (!meta.tokens.empty()) {
      auto [first, last] = by_branch_.equal_range(std::pair{meta.parent, meta.tokens.front()});
      for (auto b = first; b != last; ++b) {
        if (b->second == key) {
          by_branch_.erase(b);
          break;
        }
      }
    }
    stats_.segments -= 1;
    stats_.tokens -= static_cast<std::int64_t>(meta.tokens.size());
  } else if (auto positions = checkpoint_positions_.find(meta.ns); positions != checkpoint_positions_.end()) {
    if (auto p = positions->second.find(meta.begin); p != positions->second.end()) positions->second.erase(p);
    if (positions->second.empty()) checkpoint_positions_.erase(positions);
    stats_.checkpoints -= 1;
  }
  stats_.bytes -= it->second.file_bytes;
  by_scope_[meta.scope].remove(it->second.file_bytes,
                               meta.kind == RecordKind::segment ? static_cast<std::int64_t>(meta.tokens.size()) : 0);
  settle(by_scope_, meta.scope);
  stats_.removed[static_cast<size_t>(reason)] += 1;
  lru_.erase(it->second.lru);
  entries_.erase(it);
  changed_.touched(key);
}

bool DiskStore::make_room_locked(std::uint64_t incoming) {
  if (incoming > options_.capacity_bytes) return false;
  while (stats_.bytes + incoming > options_.capacity_bytes) {
    // The least recently used file that no other indexed segment extends.
    auto victim = std::find_if(lru_.rbegin(), lru_.rend(), [&](const Digest& key) { return !child_count_.contains(key); });
    if (victim == lru_.rend()) return false;
    remove_locked(*victim, DiskRemoval::capacity);
  }
  return true;
}

bool DiskStore::has(const Digest& key) const {
  std::lock_guard lock(mutex_);
  return entries_.contains(key) || queued_.contains(key);
}

std::optional<RecordMeta> DiskStore::meta(const Digest& key) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.meta;
}

std::optional<SegmentIndex::Compared> DiskStore::compare(const Digest& key, std::span<const engine::Token> rest) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  const std::vector<engine::Token>& tokens = it->second.meta.tokens;
  const auto common = std::ranges::mismatch(tokens, rest).in1 - tokens.begin();
  return Compared{it->second.meta.begin, static_cast<std::int32_t>(tokens.size()), static_cast<std::int32_t>(common)};
}

std::vector<Digest> DiskStore::children(const Digest& parent, engine::Token first) const {
  std::lock_guard lock(mutex_);
  std::vector<Digest> out;
  auto [lo, hi] = by_branch_.equal_range(std::pair{parent, first});
  for (auto it = lo; it != hi; ++it) out.push_back(it->second);
  return out;
}

std::vector<Digest> DiskStore::children(const Digest& parent) const {
  std::lock_guard lock(mutex_);
  std::vector<Digest> out;
  // by_branch_ is ordered by (parent, first token): a parent's children are one run.
  for (auto it = by_branch_.lower_bound(std::pair{parent, std::numeric_limits<engine::Token>::min()});
       it != by_branch_.end() && it->first.first == parent; ++it) {
    out.push_back(it->second);
  }
  return out;
}

std::vector<engine::Pos> DiskStore::checkpoint_positions(const Digest& ns) const {
  std::lock_guard lock(mutex_);
  std::vector<engine::Pos> out;
  if (auto it = checkpoint_positions_.find(ns); it != checkpoint_positions_.end()) {
    for (engine::Pos p : it->second) {
      if (out.empty() || out.back() != p) out.push_back(p);
    }
  }
  return out;
}

std::optional<Record> DiskStore::read(const Digest& key) {
  const auto started = Clock::now();
  std::optional<Record> record = read_verified(key);
  std::lock_guard lock(mutex_);
  stats_.read_seconds += std::chrono::duration<double>(Clock::now() - started).count();
  return record;
}

std::vector<std::optional<Record>> DiskStore::read_all(std::span<const Digest> keys) {
  const auto started = Clock::now();
  std::vector<std::optional<Record>> out(keys.size());
  // A few reads in flight at once: one file's open, read and checksum overlap another's I/O.
  constexpr std::size_t kReaders = 3;
  std::atomic<std::size_t> next{0};
  auto reader = [&] {
    for (std::size_t i = next++; i < keys.size(); i = next++) out[i] = read_verified(keys[i]);
  };
  {
    std::vector<std::jthread> readers;
    for (std::size_t r = 1; r < std::min(kReaders, keys.size()); ++r) readers.emplace_back(reader);
    reader();
  }
  std::lock_guard lock(mutex_);
  stats_.read_seconds += std::chrono::duration<double>(Clock::now() - started).count();
  return out;
}

std::optional<Record> DiskStore::read_verified(const Digest& key) {
  RecordKind kind;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    kind = it->second.meta.kind;
  }
  const fs::path path = file_of(key, kind);
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st{};
  if (!fd.ok() || ::fstat(fd.get(), &st) != 0) {
    std::lock_guard lock(mutex_);
    if (entries_.contains(key)) {  // not evicted meanwhile: the file went behind the index's back
      stats_.read_errors += 1;
      remove_locked(key, DiskRemoval::truncated);
    }
    return std::nullopt;
  }
  const auto file_bytes = static_cast<std::uint64_t>(st.st_size);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  const Digest* model = options_.model ? &*options_.model : nullptr;
  DecodedHeader header = read_record_header(fd.get(), file_bytes, model);
  if (header.fault == RecordFault::none && header.meta.key != key) header.fault = RecordFault::checksum;
  Record record;
  if (header.fault == RecordFault::none) {
    record.payload.resize(header.meta.payload_bytes);
    if (!read_exact(fd.get(), record.payload.data(), record.payload.size(), static_cast<off_t>(header.size))) {
      header.fault = RecordFault::truncated;
    } else if (payload_checksum(record.payload) != header.meta.payload_checksum) {
      header.fault = RecordFault::checksum;
    }
  }
  if (header.fault != RecordFault::none) {
    spdlog::warn("cache: disk file {} failed verification ({}); removed, the request continues without it",
                 path.string(), record_fault_name(header.fault));
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      remove_locked(key, removal_for(header.fault));
    } else {
      std::error_code ec;
      fs::remove(path, ec);
    }
    return std::nullopt;
  }
  ::futimens(fd.get(), nullptr);  // the file's mtime is its last use across restarts
  record.meta = std::move(header.meta);
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) lru_.splice(lru_.begin(), lru_, it->second.lru);
  stats_.reads += 1;
  stats_.read_bytes += file_bytes;
  return record;
}

void DiskStore::prefetch(std::span<const Digest> keys) const {
  std::vector<fs::path> paths;
  {
    std::lock_guard lock(mutex_);
    for (const Digest& key : keys) {
      if (auto it = entries_.find(key); it != entries_.end()) paths.push_back(file_of(key, it->second.meta.kind));
    }
  }
  for (const fs::path& path : paths) {
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.ok()) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_WILLNEED);
  }
}

void DiskStore::touch(std::span<const Digest> keys) {
  std::lock_guard lock(mutex_);
  for (const Digest& key : keys) {
    if (auto it = entries_.find(key); it != entries_.end()) lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
}

bool DiskStore::enqueue(Job job) {
  std::uint64_t bytes = 0;
  for (const Record& r : job.records) bytes += r.payload.size() + kRecordHeaderBytes + r.meta.tokens.size() * 4;
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || stats_.queue_bytes + bytes > options_.queue_capacity_bytes) {
      stats_.writes_dropped += 1;
      return false;
    }
    for (const Record& r : job.records) queued_.insert(r.meta.key);
    stats_.queue_bytes += bytes;
    queue_.push_back(std::move(job));
  }
  work_ready_.notify_one();
  return true;
}

void DiskStore::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

std::uint64_t DiskStore::clear() {
  std::unique_lock lock(mutex_);
  queue_.clear();
  queued_.clear();
  stats_.queue_bytes = 0;
  idle_.wait(lock, [&] { return !writing_; });
  const std::uint64_t freed = stats_.bytes;
  while (!lru_.empty()) remove_locked(lru_.back(), DiskRemoval::reset);
  return freed;
}

ScopeUsage DiskStore::erase(std::span<const Digest> keys) {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return !writing_; });
  ScopeUsage held;
  for (const Digest& key : keys) {
    const auto it = entries_.find(key);
    if (it == entries_.end()) continue;
    held.entries += 1;
    held.bytes += it->second.file_bytes;
    if (it->second.meta.kind == RecordKind::segment) held.tokens += static_cast<std::int64_t>(it->second.meta.tokens.size());
    remove_locked(key, DiskRemoval::reset);
  }
  return held;
}

ScopeUsage DiskStore::clear_scope(const ScopeId& scope) {
  std::unique_lock lock(mutex_);
  std::erase_if(queue_, [&](const Job& job) {
    const bool ours = std::ranges::any_of(job.records, [&](const Record& r) { return r.meta.scope == scope; });
    if (!ours) return false;
    for (const Record& r : job.records) {
      queued_.erase(r.meta.key);
      const std::uint64_t bytes = r.payload.size() + kRecordHeaderBytes + r.meta.tokens.size() * 4;
      stats_.queue_bytes -= std::min(stats_.queue_bytes, bytes);
    }
    return true;
  });
  idle_.wait(lock, [&] { return !writing_; });
  const auto it = by_scope_.find(scope);
  if (it == by_scope_.end()) return {};
  const ScopeUsage held = it->second;
  std::vector<Digest> keys;
  for (const auto& [key, entry] : entries_) {
    if (entry.meta.scope == scope) keys.push_back(key);
  }
  for (const Digest& key : keys) remove_locked(key, DiskRemoval::reset);
  return held;
}

UsageByScope DiskStore::usage_by_scope() const {
  std::lock_guard lock(mutex_);
  return by_scope_;
}

DiskStats DiskStore::stats() const {
  std::lock_guard lock(mutex_);
  DiskStats out = stats_;
  out.files = static_cast<std::int64_t>(entries_.size());
  return out;
}

std::optional<std::vector<Digest>> DiskStore::take_changed() {
  std::lock_guard lock(mutex_);
  return changed_.take(std::max<std::size_t>(4096, 2 * entries_.size()));
}

void DiskStore::for_each_segment(const std::function<void(const RecordMeta&)>& visit) const {
  std::lock_guard lock(mutex_);
  for (const auto& [key, entry] : entries_) {
    if (entry.meta.kind == RecordKind::segment) visit(entry.meta);
  }
}

}  // namespace prefixd::cache
