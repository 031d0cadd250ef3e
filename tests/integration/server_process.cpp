#include "server_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace prefixd::testing {
namespace {

// posix_spawn wants a mutable, null-terminated char* array; this owns the strings behind it.
class Argv {
 public:
  explicit Argv(std::vector<std::string> items) : items_(std::move(items)) {
    for (auto& item : items_) pointers_.push_back(item.data());
    pointers_.push_back(nullptr);
  }
  char* const* get() { return pointers_.data(); }

 private:
  std::vector<std::string> items_;
  std::vector<char*> pointers_;
};

std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    // A developer's PREFIXD_* settings must not leak into a test's server.
    if (name.starts_with("PREFIXD_")) continue;
    env.push_back(entry);
  }
  for (const auto& [name, value] : overrides) env.push_back(name + "=" + value);
  return env;
}

}  // namespace

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

ServerProcess::ServerProcess(ServerConfig config) {
  port_ = pick_free_port();
  char log_template[] = "/tmp/prefixd-test-server-XXXXXX";
  const int log_fd = ::mkstemp(log_template);
  if (log_fd < 0) throw std::runtime_error("mkstemp failed");
  log_path_ = log_template;

  std::vector<std::string> args = {PREFIXD_BINARY, "serve",      "--model",    PREFIXD_TINY_MODEL,
                                   "--host",       "127.0.0.1",  "--port",     std::to_string(port_),
                                   "--ctx-size",   std::to_string(config.ctx_size), "--parallel",
                                   std::to_string(config.parallel)};
  args.insert(args.end(), config.extra_args.begin(), config.extra_args.end());

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, log_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, log_fd, STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, log_fd);
  Argv argv(std::move(args));
  Argv envp(child_environment(config.env));
  const int rc = ::posix_spawn(&pid_, PREFIXD_BINARY, &actions, nullptr, argv.get(), envp.get());
  posix_spawn_file_actions_destroy(&actions);
  ::close(log_fd);
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn failed: ") + std::strerror(rc));
  try {
    wait_until_healthy(std::chrono::seconds(60));
  } catch (...) {
    shutdown();  // a constructor that throws gets no destructor call
    throw;
  }
}

ServerProcess::~ServerProcess() { shutdown(); }

void ServerProcess::shutdown() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
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
  if (!log_path_.empty()) {
    ::unlink(log_path_.c_str());
    log_path_.clear();
  }
}

bool ServerProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void ServerProcess::wait_until_healthy(std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  httplib::Client probe("127.0.0.1", port_);
  probe.set_connection_timeout(std::chrono::milliseconds(500));
  probe.set_read_timeout(std::chrono::seconds(2));
  while (std::chrono::steady_clock::now() < deadline) {
    if (!running()) throw std::runtime_error("prefixd serve exited during startup:\n" + log());
    if (auto res = probe.Get("/health"); res && res->status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("prefixd serve did not answer /health within the limit:\n" + log());
}

std::unique_ptr<httplib::Client> ServerProcess::client(const std::string& api_key) const {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port_);
  client->set_connection_timeout(std::chrono::seconds(5));
  client->set_read_timeout(std::chrono::seconds(120));
  client->set_write_timeout(std::chrono::seconds(10));
  if (!api_key.empty()) client->set_bearer_token_auth(api_key);
  return client;
}

std::string ServerProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

JsonReply post_json(httplib::Client& client, const std::string& path, const nlohmann::json& body) {
  JsonReply reply;
  auto res = client.Post(path, body.dump(), "application/json");
  if (!res) return reply;
  reply.status = res->status;
  reply.raw = res->body;
  reply.body = nlohmann::json::parse(res->body, nullptr, false);
  return reply;
}

JsonReply get_json(httplib::Client& client, const std::string& path) {
  JsonReply reply;
  auto res = client.Get(path);
  if (!res) return reply;
  reply.status = res->status;
  reply.raw = res->body;
  reply.body = nlohmann::json::parse(res->body, nullptr, false);
  return reply;
}

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> payloads;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("data: ")) payloads.push_back(line.substr(6));
  }
  return payloads;
}

double metric_value(const std::string& metrics_text, const std::string& name) {
  std::istringstream in(metrics_text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(name + " ")) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

}  // namespace prefixd::testing
