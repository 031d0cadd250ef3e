// prefixd bench — a server's memory, read from /proc/PID/status while it runs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace prefixd::bench {

struct ProcMemory {
  long rss_kb = -1;  // VmRSS
  long hwm_kb = -1;  // VmHWM: the peak resident set since the process started
};

// Parses the VmRSS and VmHWM lines of a /proc/PID/status text.
ProcMemory parse_proc_status(const std::string& status);
// Reads /proc/PID/status; -1 fields when the process is gone.
ProcMemory read_proc_memory(pid_t pid);

// (seconds since `origin`, VmRSS in kB) pairs, appended by an RssSampler.
using RssSeries = std::vector<std::pair<double, long>>;

// Samples VmRSS of one process every `period` on its own thread until destroyed, appending to a
// series shared with later samplers of the same run (a restarted server continues the line).
class RssSampler {
 public:
  RssSampler(pid_t pid, std::chrono::steady_clock::time_point origin, RssSeries& series, std::mutex& lock,
             std::chrono::milliseconds period = std::chrono::milliseconds(250));
  ~RssSampler() = default;  // the jthread asks the loop to stop and joins
  RssSampler(const RssSampler&) = delete;
  RssSampler& operator=(const RssSampler&) = delete;

 private:
  std::jthread thread_;
};

}  // namespace prefixd::bench
