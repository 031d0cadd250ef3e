#include "bench/rss.h"

#include <condition_variable>
#include <fstream>
#include <sstream>

namespace prefixd::bench {
namespace {

long kb_after(const std::string& line, std::string_view key) {
  if (!line.starts_with(key)) return -1;
  std::istringstream in(line.substr(key.size()));
  long value = -1;
  in >> value;
  return value;
}

}  // namespace

ProcMemory parse_proc_status(const std::string& status) {
  ProcMemory m;
  std::istringstream lines(status);
  std::string line;
  while (std::getline(lines, line)) {
    if (const long v = kb_after(line, "VmRSS:"); v >= 0) m.rss_kb = v;
    if (const long v = kb_after(line, "VmHWM:"); v >= 0) m.hwm_kb = v;
  }
  return m;
}

ProcMemory read_proc_memory(pid_t pid) {
  if (pid <= 0) return {};
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return parse_proc_status(text.str());
}

RssSampler::RssSampler(pid_t pid, std::chrono::steady_clock::time_point origin, RssSeries& series, std::mutex& lock,
                       std::chrono::milliseconds period)
    : thread_([pid, origin, &series, &lock, period](std::stop_token stop) {
        std::mutex wait_lock;
        std::condition_variable_any wake;
        std::unique_lock<std::mutex> guard(wait_lock);
        while (!stop.stop_requested()) {
          const ProcMemory m = read_proc_memory(pid);
          if (m.rss_kb >= 0) {
            const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
            const std::lock_guard<std::mutex> append(lock);
            series.emplace_back(t, m.rss_kb);
          }
          // Returns early when the destructor requests a stop.
          wake.wait_for(guard, stop, period, [] { return false; });
        }
      }) {}

}  // namespace prefixd::bench
