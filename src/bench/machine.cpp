#include "bench/machine.h"

#include <unistd.h>

#include <array>
#include <cctype>
#include <chrono>
#include <format>
#include <fstream>
#include <thread>

namespace prefixd::bench {
namespace {

// The value after "key:" on the first line of a /proc file that starts with `key`.
std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(key)) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    const auto first = value.find_first_not_of(" \t");
    return first == std::string::npos ? "" : value.substr(first);
  }
  return "";
}

}  // namespace

nlohmann::json machine_json() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  double load = -1;
  std::ifstream("/proc/loadavg") >> load;
  long mem_kb = 0;
  try {
    mem_kb = std::stol(proc_field("/proc/meminfo", "MemTotal"));
  } catch (const std::exception&) {
    mem_kb = 0;  // unknown; the report says 0
  }
  return {{"hostname", std::string(host.data())},
          {"cpus", std::thread::hardware_concurrency()},
          {"cpu_model", proc_field("/proc/cpuinfo", "model name")},
          {"mem_total_mib", mem_kb / 1024},
          {"load_average_1m", load}};
}

std::string utc_timestamp() {
  return std::format("{:%Y-%m-%dT%H:%M:%SZ}", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
}

std::string utc_date() {
  return std::format("{:%Y-%m-%d}", std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now()));
}

std::string file_safe(const std::string& text) {
  std::string out;
  for (unsigned char c : text) out += std::isalnum(c) || c == '-' || c == '_' || c == '.' ? static_cast<char>(c) : '-';
  return out.empty() ? "unknown" : out;
}

}  // namespace prefixd::bench
