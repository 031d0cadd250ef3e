#include "bursts.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <latch>
#include <sstream>
#include <thread>

#include "bench/rss.h"

namespace prefixd::testing {

using Clock = std::chrono::steady_clock;

std::vector<Timed> post_together(const ServerProcess& server, const std::string& path, const std::vector<std::string>& bodies) {
  std::latch start(static_cast<std::ptrdiff_t>(bodies.size()));
  std::vector<std::future<Timed>> pending;
  for (const auto& body : bodies) {
    pending.push_back(std::async(std::launch::async, [&server, &path, &body, &start] {
      auto client = server.client();
      start.arrive_and_wait();
      const auto t0 = Clock::now();
      auto res = client->Post(path, body, "application/json");
      Timed timed;
      timed.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (res) {
        timed.reply.status = res->status;
        timed.reply.raw = res->body.substr(0, 512);
        timed.reply.body = nlohmann::json::parse(res->body, nullptr, false);
      }
      return timed;
    }));
  }
  std::vector<Timed> out;
  for (auto& p : pending) out.push_back(p.get());
  return out;
}

void reset_peak_rss(pid_t pid) { std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5"; }

long settled_rss_kb(pid_t pid, long target_kb, double tolerance, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  long rss = bench::read_proc_memory(pid).rss_kb;
  while (rss > static_cast<long>(static_cast<double>(target_kb) * (1.0 + tolerance)) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    rss = bench::read_proc_memory(pid).rss_kb;
  }
  return rss;
}

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field && i <= 15; ++i) {
    if (i >= 14) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

Burst run_burst(const ServerProcess& server, const std::string& path, const std::vector<std::string>& bodies,
                Settle settle) {
  const pid_t pid = server.pid();
  Burst burst;
  burst.before_kb = bench::read_proc_memory(pid).rss_kb;
  reset_peak_rss(pid);
  const double cpu_before = cpu_seconds(pid);
  burst.results = post_together(server, path, bodies);
  burst.cpu_seconds = cpu_seconds(pid) - cpu_before;
  burst.peak_kb = bench::read_proc_memory(pid).hwm_kb;
  burst.after_kb = settled_rss_kb(pid, settle.target_kb > 0 ? settle.target_kb : burst.before_kb, settle.tolerance, settle.limit);
  for (const auto& r : burst.results) burst.slowest_ms = std::max(burst.slowest_ms, r.ms);
  std::cout << path << ": RSS before " << burst.before_kb / 1024 << " MiB, peak " << burst.peak_kb / 1024
            << " MiB, after " << burst.after_kb / 1024 << " MiB; server CPU " << burst.cpu_seconds * 1000
            << " ms; times ms:";
  for (const auto& r : burst.results) std::cout << ' ' << static_cast<int>(r.ms);
  std::cout << '\n';
  return burst;
}

}  // namespace prefixd::testing
