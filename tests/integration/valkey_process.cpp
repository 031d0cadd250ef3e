#include "valkey_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct PipeClose {
  void operator()(FILE* pipe) const { pclose(pipe); }
};

}  // namespace

std::string run_command(const std::string& command) {
  std::unique_ptr<FILE, PipeClose> pipe(popen(command.c_str(), "r"));
  if (!pipe) return {};
  std::string out;
  std::array<char, 512> buffer{};
  while (fgets(buffer.data(), static_cast<int>(buffer.size()), pipe.get()) != nullptr) out += buffer.data();
  return out;
}

bool have_program(const std::string& name) { return run_command("command -v " + name + " 2>/dev/null") != ""; }

ValkeyProcess::ValkeyProcess(int port, std::vector<std::string> extra_args)
    : port_(port), extra_args_(std::move(extra_args)) {
  start();
}

std::string ValkeyProcess::cli(const std::string& args) const {
  return run_command("valkey-cli -p " + std::to_string(port_) + " " + args + " 2>&1");
}

void ValkeyProcess::signal(int signal_number) const { ::kill(pid_, signal_number); }

void ValkeyProcess::kill_now() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void ValkeyProcess::start() {
  std::vector<std::string> args{"valkey-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no", "--loglevel", "warning"};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  pid_ = fork();
  if (pid_ == 0) {
    // Its startup warnings (memory overcommit) are noise in the test output.
    const int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execvp("valkey-server", argv.data());
    _exit(127);
  }
  const auto deadline = Clock::now() + 30s;
  while (Clock::now() < deadline) {
    if (cli("ping").starts_with("PONG")) return;
    // One that exits at once could not listen (its port, or its cluster bus port, was taken).
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("valkey-server exited at startup on port " + std::to_string(port_));
    }
    std::this_thread::sleep_for(50ms);
  }
  kill_now();
  throw std::runtime_error("valkey-server did not answer on port " + std::to_string(port_));
}

ValkeyCluster::ValkeyCluster(int count) {
  dir_ = std::filesystem::temp_directory_path() /
         ("prefixd-valkey-cluster-" + std::to_string(getpid()) + "-" + std::to_string(pick_free_port()));
  std::filesystem::create_directories(dir_);
  std::string create = "valkey-cli --cluster create";
  for (int i = 0; i < count; ++i) {
    // A cluster node also listens on its port + 10000 (the cluster bus): both must be free, and
    // below the range outgoing connections take their ports from. A node whose port was taken
    // meanwhile is started again on another.
    const int below = bench::ephemeral_ports().first;
    auto start_node = [&]() -> std::pair<int, std::unique_ptr<ValkeyProcess>> {
      for (int attempt = 1;; ++attempt) {
        int port = pick_free_port();
        for (int draw = 0; draw < 256 && (port + 10000 >= below || !bench::port_is_free(port + 10000)); ++draw) port = pick_free_port();
        try {
          return {port, std::make_unique<ValkeyProcess>(
                            port, std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file",
                                                           "nodes-" + std::to_string(port) + ".conf", "--dir", dir_.string()})};
        } catch (const std::runtime_error&) {
          if (attempt == 4) throw;
        }
      }
    };
    auto [port, node] = start_node();
    nodes_.push_back(std::move(node));
    create += " 127.0.0.1:" + std::to_string(port);
  }
  const auto output = run_command(create + " --cluster-replicas 0 --cluster-yes 2>&1");
  const auto deadline = Clock::now() + 20s;
  for (const auto& node : nodes_) {
    while (node->cli("cluster info").find("cluster_state:ok") == std::string::npos) {
      if (Clock::now() > deadline) throw std::runtime_error("the cluster did not form:\n" + output);
      std::this_thread::sleep_for(100ms);
    }
  }
}

ValkeyCluster::~ValkeyCluster() {
  nodes_.clear();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace prefixd::testing
