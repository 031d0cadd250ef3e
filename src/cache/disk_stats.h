// prefixd cache — the disk tier's counters, as /v1/cache/stats and /metrics report them.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace prefixd::cache {

// Why a file left the directory (or was never admitted), for the counters.
enum class DiskRemoval { capacity, superseded, checksum, truncated, foreign, version, incomplete, reset, gc };
inline constexpr int kDiskRemovalCount = 9;
const char* disk_removal_name(DiskRemoval reason);

struct DiskStats {
  bool enabled = false;
  std::string path;
  std::int64_t files = 0;
  std::int64_t segments = 0;
  std::int64_t checkpoints = 0;
  std::int64_t tokens = 0;               // sum of the segments' lengths
  std::uint64_t bytes = 0;
  std::uint64_t capacity_bytes = 0;
  std::uint64_t queue_bytes = 0;         // waiting to be written
  std::uint64_t queue_capacity_bytes = 0;
  std::int64_t writes = 0;               // files written
  std::uint64_t write_bytes = 0;
  std::int64_t writes_dropped = 0;       // jobs refused because the queue was full
  std::int64_t write_errors = 0;         // files that could not be written (no space, read-only, ...)
  std::int64_t reads = 0;                // files read and verified
  std::uint64_t read_bytes = 0;
  double read_seconds = 0;               // wall time of those reads (open to verified)
  std::int64_t read_errors = 0;          // indexed files that could not be opened or read
  std::array<std::int64_t, kDiskRemovalCount> removed{};  // by DiskRemoval
  // Counted by the prompt cache: requests whose reused prefix came (in part) from disk, and the
  // records it promoted from disk to the host tier and the checkpoint store.
  std::int64_t hits = 0;
  std::int64_t promoted_segments = 0;
  std::int64_t promoted_checkpoints = 0;
};

}  // namespace prefixd::cache
