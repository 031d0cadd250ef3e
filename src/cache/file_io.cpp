#include "cache/file_io.h"

#include <cerrno>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

namespace prefixd::cache {
namespace fs = std::filesystem;


bool read_exact(int fd, std::uint8_t* out, std::size_t n, off_t offset) {
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

namespace {

bool write_all(int fd, std::span<const std::uint8_t> data) {
  while (!data.empty()) {
    const ssize_t put = ::write(fd, data.data(), data.size());
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) {
      if (put == 0) errno = EIO;
      return false;
    }
    data = data.subspan(static_cast<std::size_t>(put));
  }
  return true;
}

}  // namespace

std::optional<WriteFailure> write_atomically(const fs::path& temp, const fs::path& path,
                                             std::initializer_list<std::span<const std::uint8_t>> parts) {
  const auto fail = [&](const char* step, int error) {
    std::error_code ec;
    fs::remove(temp, ec);
    return std::optional<WriteFailure>(WriteFailure{step, error});
  };
  FileDescriptor fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.ok()) return fail("create", errno);
  for (std::span<const std::uint8_t> part : parts) {
    if (!write_all(fd.get(), part)) return fail("write", errno);
  }
  if (::fsync(fd.get()) != 0) return fail("fsync", errno);
  if (::close(fd.release()) != 0) return fail("close", errno);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return fail("mkdir", ec.value());
  if (::rename(temp.c_str(), path.c_str()) != 0) return fail("rename", errno);
  FileDescriptor dir(::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.ok()) ::fsync(dir.get());
  return std::nullopt;
}

}  // namespace prefixd::cache
