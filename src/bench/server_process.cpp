#include "bench/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <random>
#include <utility>
#include <stdexcept>
#include <thread>

#include <httplib.h>
#include "util/unique_fd.h"

extern char** environ;

namespace prefixd::bench {
namespace {

// posix_spawn takes char* const[]; this keeps the strings those pointers point into alive.
class CStringArray {
 public:
  explicit CStringArray(std::vector<std::string> items) : items_(std::move(items)) {
    for (auto& item : items_) pointers_.push_back(item.data());
    pointers_.push_back(nullptr);
  }
  char* const* get() { return pointers_.data(); }

 private:
  std::vector<std::string> items_;
  std::vector<char*> pointers_;
};

std::vector<std::string> child_environment(const ServerLaunch& launch) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const bool stripped =
        std::ranges::any_of(launch.strip_env_prefixes, [&](const std::string& p) { return entry.starts_with(p); }) ||
        std::ranges::any_of(launch.extra_env, [&](const auto& kv) { return entry.starts_with(kv.first + "="); });
    if (!stripped) env.emplace_back(entry);
  }
  for (const auto& [name, value] : launch.extra_env) env.push_back(name + "=" + value);
  return env;
}

using Fd = util::UniqueFd;

}  // namespace

namespace {

// The kernel's range for the local ports of outgoing connections (ip_local_port_range).
std::pair<int, int> ephemeral_port_range() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768, high = 60999;
  if (!(in >> low >> high) || low < 1 || high < low || high > 65535) return {32768, 60999};
  return {low, high};
}

}  // namespace

bool port_is_free(int port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

std::pair<int, int> ephemeral_ports() { return ephemeral_port_range(); }

int pick_free_port() {
  // Ports are drawn at random from outside the ephemeral range: a port the kernel hands out for
  // bind(0) is also one it hands out as the local end of any outgoing connection, so between this
  // check and the server's own bind, another client's connection could take it (seen as "Address
  // already in use" with many servers and clients on one machine). Outside that range only another
  // listener can, and a random draw makes two launchers choosing the same port unlikely.
  const auto [low, high] = ephemeral_port_range();
  constexpr int kLowest = 10000;
  const bool below = low - 1 - kLowest >= 1000;
  const int first = below ? kLowest : high + 1;
  const int last = below ? low - 1 : 65535;
  if (last - first >= 1000) {
    std::mt19937 draw(std::random_device{}());
    std::uniform_int_distribution<int> port(first, last);
    for (int attempt = 0; attempt < 64; ++attempt) {
      const int candidate = port(draw);
      if (port_is_free(candidate)) return candidate;
    }
  }
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throw std::runtime_error(std::string("socket(): ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error(std::string("cannot find a free port: ") + std::strerror(errno));
  }
  return ntohs(addr.sin_port);
}

ServerProcess::ServerProcess(ServerLaunch launch, int port) : launch_(std::move(launch)), port_(port) {
  std::vector<std::string> argv = {launch_.binary};
  argv.insert(argv.end(), launch_.args.begin(), launch_.args.end());
  for (const auto& a : argv) command_line_ += (command_line_.empty() ? "" : " ") + a;

  Fd log(::open(launch_.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (log.get() < 0) throw std::runtime_error("cannot open the server log " + launch_.log_path + ": " + std::strerror(errno));
  const std::string banner = "\n=== " + command_line_ + "\n";
  if (::write(log.get(), banner.data(), banner.size()) < 0) {
    throw std::runtime_error("cannot write the server log " + launch_.log_path);
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, log.get(), STDERR_FILENO);
  CStringArray args(std::move(argv));
  CStringArray env(child_environment(launch_));
  const int rc = ::posix_spawn(&pid_, launch_.binary.c_str(), &actions, nullptr, args.get(), env.get());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot start " + launch_.binary + ": " + std::strerror(rc));
  }
  try {
    wait_until_healthy(launch_.startup_limit);
  } catch (...) {
    stop();  // a constructor that throws gets no destructor call
    throw;
  }
}

ServerProcess::~ServerProcess() { stop(); }

void ServerProcess::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
}

bool ServerProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

void ServerProcess::wait_until_healthy(std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  httplib::Client probe("127.0.0.1", port_);
  probe.set_connection_timeout(std::chrono::milliseconds(500));
  probe.set_read_timeout(std::chrono::seconds(5));
  while (std::chrono::steady_clock::now() < deadline) {
    if (!running()) {
      throw std::runtime_error("the server exited during startup (" + command_line_ + "); its log ends with:\n" + log_tail());
    }
    if (auto res = probe.Get("/health"); res && res->status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("the server did not answer GET /health within " + std::to_string(limit.count()) + " s (" +
                           command_line_ + "); its log ends with:\n" + log_tail());
}

std::string ServerProcess::log_tail(std::size_t max_bytes) const {
  std::ifstream in(launch_.log_path, std::ios::binary | std::ios::ate);
  if (!in) return "(no log)";
  const auto size = static_cast<std::size_t>(in.tellg());  // NOLINT: tellg() >= 0 on an open file
  const std::size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string tail(size - start, '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  return tail;
}

}  // namespace prefixd::bench
