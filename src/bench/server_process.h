// prefixd bench — a server child process (prefixd, or llama-server for `prefixd-bench compare`)
// that lives exactly as long as its owner. The integration tests start theirs with it too.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace prefixd::bench {

struct ServerLaunch {
  std::string binary;              // the prefixd executable
  std::vector<std::string> args;   // after argv[0]: "serve", "--model", ...
  std::string log_path;            // the child's stdout and stderr go here (appended)
  std::chrono::seconds startup_limit{600};
  // Variables with these prefixes are removed from the child's environment (see ServerProcess).
  std::vector<std::string> strip_env_prefixes{"PREFIXD_"};
  // NAME=VALUE pairs added after stripping: the settings a caller wants the child to see.
  std::vector<std::pair<std::string, std::string>> extra_env;
};

// Starts the server, waits until GET /health answers 200, and on destruction stops it (SIGTERM,
// SIGKILL after a grace period) and reaps it, so no benchmark run leaves a server behind.
// PREFIXD_* variables (or the launch's other prefixes, e.g. LLAMA_ARG_ for llama-server) are removed
// from the child's environment: a developer's settings must not silently change what is measured
// (use --extra-args for that).
// Throws std::runtime_error with the tail of the server's log when it exits or stays silent.
class ServerProcess {
 public:
  ServerProcess(ServerLaunch launch, int port);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  // The child's process id while it runs (for /proc/PID/status), -1 after it stopped.
  pid_t pid() const { return pid_; }
  const std::string& command_line() const { return command_line_; }
  // The last `max_bytes` of the server's log (all of it by default is too much for an error).
  std::string log_tail(std::size_t max_bytes = 4000) const;
  std::string log() const { return log_tail(std::numeric_limits<std::size_t>::max()); }
  bool running();
  // How the child ended, once running() has seen it exit: its exit status, or 128 + the signal
  // that killed it; -1 while it runs or when stop() reaped it.
  int exit_status() const { return exit_status_; }

 private:
  void wait_until_healthy(std::chrono::seconds limit);
  void stop();

  ServerLaunch launch_;
  int port_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
  std::string command_line_;
};

// A loopback port that was free a moment ago, outside the range the kernel gives outgoing
// connections where that range leaves room.
int pick_free_port();
// Whether a listener could bind `port` on the loopback address now.
bool port_is_free(int port);
// The kernel's range of local ports for outgoing connections (ip_local_port_range).
std::pair<int, int> ephemeral_ports();

}  // namespace prefixd::bench
