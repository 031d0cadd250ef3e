// prefixd util — small value types every component may use, with no dependency beyond the
// standard library and POSIX. Must not know: anything of prefixd's components.
//
// UniqueFd owns one POSIX file descriptor and closes it when it goes (the one owner of raw
// descriptors in the project; close errors that matter are checked through release()).
#pragma once

#include <unistd.h>

#include <utility>

namespace prefixd::util {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // Gives the descriptor up without closing it (to close it and check the result).
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace prefixd::util
