// prefixd models — one model's server: a `prefixd serve` child process on a loopback port, which
// the multi-model front forwards that model's requests to. Its output goes to the front's.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace prefixd::models {

class ModelChild {
 public:
  // Starts `argv` (argv[0] the program). Throws std::runtime_error when it cannot be started.
  explicit ModelChild(const std::vector<std::string>& argv);
  // Stops it: SIGTERM, then SIGKILL after `grace` (stop()), and reaps it.
  ~ModelChild();
  ModelChild(const ModelChild&) = delete;
  ModelChild& operator=(const ModelChild&) = delete;

  // True while it has not exited; once it has, exit_status() says how.
  bool running();
  int exit_status() const { return status_; }  // 128 + signal when killed; -1 while running
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(30));

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

}  // namespace prefixd::models
