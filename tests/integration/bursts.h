// prefixd integration tests — bursts of concurrent requests and what they cost the server: its
// resident set before, at the peak and after, and its CPU time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {

// Whether freed memory goes back through glibc's allocator, whose return to the system the memory
// tests check. AddressSanitizer's allocator holds freed blocks in quarantine on purpose, so under
// it RSS stays up after a burst whatever the server does.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSystemAllocator = false;
#else
inline constexpr bool kSystemAllocator = true;
#endif

struct Timed {
  JsonReply reply;  // raw: the first 512 bytes of the body
  double ms = 0;
};

// Sends every body at once (each from its own connection, released together) and times each.
std::vector<Timed> post_together(const ServerProcess& server, const std::string& path, const std::vector<std::string>& bodies);

// Resets the peak resident set of `pid` to its current resident set (Linux: clear_refs 5).
void reset_peak_rss(pid_t pid);

// VmRSS once it has settled within `tolerance` of `target_kb` (or the last sample once `limit`
// has passed): freed memory may take a moment to be handed back.
long settled_rss_kb(pid_t pid, long target_kb, double tolerance,
                    std::chrono::milliseconds limit = std::chrono::milliseconds(4000));

// CPU time (user and system) the process has used so far, from /proc/PID/stat.
double cpu_seconds(pid_t pid);

struct Burst {
  std::vector<Timed> results;
  long before_kb = 0;  // VmRSS before
  long peak_kb = 0;    // VmHWM over the burst
  long after_kb = 0;   // VmRSS once settled
  double cpu_seconds = 0;
  double slowest_ms = 0;
};

// How long RSS after a burst may take to settle, and where to: within `tolerance` of
// `target_kb` (0: of RSS before the burst).
struct Settle {
  double tolerance = 0.10;
  std::chrono::milliseconds limit{4000};
  long target_kb = 0;
};

// Posts `bodies` together (post_together) and measures the server around them. Prints one line.
Burst run_burst(const ServerProcess& server, const std::string& path, const std::vector<std::string>& bodies,
                Settle settle = {});

}  // namespace prefixd::testing
