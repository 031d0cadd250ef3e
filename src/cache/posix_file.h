// prefixd cache — the few POSIX file calls the disk tier needs, with their retry loops in one place.
#pragma once

#include <cerrno>
#include <cstdint>
#include <span>
#include <utility>

#include <sys/types.h>
#include <unistd.h>

namespace prefixd::cache {

// Owns a file descriptor; closes it on scope exit unless released.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Reads exactly `n` bytes at `offset`; false on an error or when the file ends first.
inline bool read_exact(int fd, std::uint8_t* out, std::size_t n, off_t offset) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, out, n, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out += got;
    offset += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

// Writes all of `data`; false on an error (errno says which).
inline bool write_all(int fd, std::span<const std::uint8_t> data) {
  while (!data.empty()) {
    const ssize_t put = ::write(fd, data.data(), data.size());
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    data = data.subspan(static_cast<std::size_t>(put));
  }
  return true;
}

}  // namespace prefixd::cache
