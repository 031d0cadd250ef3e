// valkey-server processes for integration tests: one standalone server, or a cluster of several
// created with `valkey-cli --cluster create`. Each is killed and reaped on destruction.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace prefixd::testing {

// The output of a shell command, or "" when it could not run.
std::string run_command(const std::string& command);
bool have_program(const std::string& name);

// A valkey-server child on a loopback port, without persistence.
class ValkeyProcess {
 public:
  // Starts the server and waits until it answers PING; throws when it does not within 10 s.
  explicit ValkeyProcess(int port, std::vector<std::string> extra_args = {});
  ~ValkeyProcess() { kill_now(); }
  ValkeyProcess(const ValkeyProcess&) = delete;
  ValkeyProcess& operator=(const ValkeyProcess&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // valkey-cli against this server; its output.
  std::string cli(const std::string& args) const;
  void signal(int signal_number) const;
  void kill_now();
  void start();

 private:
  int port_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
};

// `count` cluster-enabled nodes with the slots spread over them (no replicas), state ok.
class ValkeyCluster {
 public:
  explicit ValkeyCluster(int count);
  ~ValkeyCluster();
  ValkeyCluster(const ValkeyCluster&) = delete;
  ValkeyCluster& operator=(const ValkeyCluster&) = delete;

  const std::vector<std::unique_ptr<ValkeyProcess>>& nodes() const { return nodes_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<ValkeyProcess>> nodes_;
};

}  // namespace prefixd::testing
