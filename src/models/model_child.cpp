#include "models/model_child.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstring>
#include <format>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace prefixd::models {

ModelChild::ModelChild(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  if (const int rc = posix_spawn(&pid_, args[0], nullptr, nullptr, args.data(), environ); rc != 0) {
    pid_ = -1;
    throw std::runtime_error(std::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  }
}

ModelChild::~ModelChild() { stop(); }

bool ModelChild::running() {
  if (pid_ < 0) return false;
  int status = 0;
  const pid_t got = waitpid(pid_, &status, WNOHANG);
  if (got == 0) return true;
  status_ = got < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  pid_ = -1;
  return false;
}

void ModelChild::stop(std::chrono::milliseconds grace) {
  if (!running()) return;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (running() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (running()) {
    kill(pid_, SIGKILL);
    while (running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace prefixd::models
