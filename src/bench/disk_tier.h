// prefixd bench — what measuring a server's disk tier needs besides HTTP: a scratch directory that
// outlives the server's restarts, the page cache of its files dropped before a restore (as a reboot
// would leave it), the tier's counters from /v1/cache/stats, a wait until its write-behind is done,
// and the yardstick: the same number of bytes read sequentially from one cold file on the same
// filesystem. None of it knows the cache's file format; it sees files, counters and time.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

// A fresh directory `<parent>/prefixd-bench-disk-XXXXXX`, removed with everything in it when the
// object goes. tier(): the subdirectory a server gets (created); probe_file(): a path next to it
// (same filesystem) for the sequential-read yardstick.
class ScratchDir {
 public:
  // `parent` empty: std::filesystem::temp_directory_path() (TMPDIR, else /tmp). Throws
  // std::runtime_error when the directory cannot be created.
  explicit ScratchDir(const std::string& parent);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path tier() const { return root_ / "tier"; }
  std::filesystem::path probe_file() const { return root_ / "sequential-read"; }

 private:
  std::filesystem::path root_;
};

// What dropping a directory's page cache did: every regular file below `dir` synced (fsync) and
// its pages released (posix_fadvise POSIX_FADV_DONTNEED); neither needs root. `resident_bytes`:
// what mincore still found in memory afterwards (0 when the drop worked; dirty or mapped pages
// can stay). Files that could not be opened count in `failed`.
struct PageCacheDrop {
  std::int64_t files = 0;
  std::uint64_t bytes = 0;
  std::uint64_t resident_bytes = 0;
  std::int64_t failed = 0;
  nlohmann::json to_json() const;
};
PageCacheDrop drop_page_cache(const std::filesystem::path& dir);

// Bytes of `path` in the page cache now (mincore of a read-only mapping); 0 for an empty file,
// nothing when it cannot be opened or mapped.
std::optional<std::uint64_t> resident_bytes(const std::filesystem::path& path);

// The yardstick: `bytes` written to a new file at `path`, synced, its pages dropped, then read
// back from the start with read(2) in kSequentialBlock blocks, timed from open to the last read
// (a restore's time also runs from open); the file is removed afterwards. Throws
// std::runtime_error when the file cannot be written or read back whole.
inline constexpr std::size_t kSequentialBlock = 8u << 20;
struct SequentialRead {
  std::uint64_t bytes = 0;
  double seconds = 0;
  std::uint64_t resident_before = 0;  // bytes still cached when the read began (0: a cold read)
  double bytes_per_second() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
  nlohmann::json to_json() const;
};
SequentialRead sequential_read(const std::filesystem::path& path, std::uint64_t bytes);

// The disk tier's counters of /v1/cache/stats (`tiers.disk`).
struct DiskCounters {
  bool enabled = false;
  std::int64_t files = 0;
  std::uint64_t bytes = 0;
  std::int64_t tokens = 0;
  std::uint64_t queue_bytes = 0;
  std::int64_t writes = 0;
  std::uint64_t write_bytes = 0;
  std::int64_t writes_dropped = 0;
  std::int64_t write_errors = 0;
  std::int64_t reads = 0;
  std::uint64_t read_bytes = 0;
  double read_seconds = 0;
  std::int64_t read_errors = 0;
  std::int64_t hits = 0;
  nlohmann::json to_json() const;
};
// Nothing when `stats` has no `tiers.disk` object (a server without a disk tier, or llama-server).
std::optional<DiskCounters> disk_counters(const nlohmann::json& stats);

// What one server lifetime read from disk between two readings of its counters.
struct DiskReads {
  std::int64_t reads = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
  std::int64_t errors = 0;
  std::int64_t hits = 0;
  double bytes_per_second() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
  nlohmann::json to_json() const;
};
DiskReads reads_between(const DiskCounters& before, const DiskCounters& after);

// Waits until the tier's write-behind is done: the queue empty and the written files, bytes and
// drops unchanged over `settle` (a donation can reach the queue a moment after the reply that
// caused it), at most `limit`. `read_stats` returns /v1/cache/stats (nothing: no stats route).
struct WriteBehind {
  bool settled = false;
  double seconds = 0;
  DiskCounters counters;  // the last reading
  nlohmann::json to_json() const;
};
struct WriteBehindTiming {
  std::chrono::milliseconds poll{100};
  std::chrono::milliseconds settle{1000};
  std::chrono::milliseconds limit{120'000};
};
WriteBehind wait_write_behind(const std::function<std::optional<nlohmann::json>()>& read_stats,
                              const WriteBehindTiming& timing = {});

}  // namespace prefixd::bench
