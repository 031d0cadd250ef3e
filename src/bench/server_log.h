// prefixd bench — where a benchmarked server's output goes: the user's file, or a temporary one
// that is removed when the run ends unless keep() was called (something failed).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace prefixd::bench {

class ServerLog {
 public:
  // `requested` empty: a fresh temporary file named /tmp/<temp_prefix>-XXXXXX.
  ServerLog(const std::string& requested, const std::string& temp_prefix) : path_(requested) {
    if (!path_.empty()) return;
    std::string pattern = "/tmp/" + temp_prefix + "-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) throw std::runtime_error("cannot create a temporary server log");
    ::close(fd);
    path_ = pattern;
    temporary_ = true;
  }
  ~ServerLog() {
    if (temporary_ && !keep_) std::remove(path_.c_str());
  }
  ServerLog(const ServerLog&) = delete;
  ServerLog& operator=(const ServerLog&) = delete;
  const std::string& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  std::string path_;
  bool temporary_ = false;
  bool keep_ = false;
};

}  // namespace prefixd::bench
