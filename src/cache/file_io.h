// prefixd cache — the few file operations the disk tier and artifacts share: positioned reads
// that do not stop short, and crash-safe whole-file writes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <span>
#include <utility>

#include <sys/types.h>

#include "util/unique_fd.h"

namespace prefixd::cache {

using FileDescriptor = util::UniqueFd;

// Reads exactly `n` bytes at `offset`; false on an error or end of file first.
bool read_exact(int fd, std::uint8_t* out, std::size_t n, off_t offset);

struct WriteFailure {
  const char* step;  // create, write, fsync, close, mkdir, rename
  int error;         // errno
};

// Writes the concatenation of `parts` to `temp`, fsyncs it, renames it to `path` (creating the
// parent directory) and fsyncs that directory: after a crash `path` is whole or absent. On failure
// `temp` is removed and `path` untouched.
std::optional<WriteFailure> write_atomically(const std::filesystem::path& temp, const std::filesystem::path& path,
                                             std::initializer_list<std::span<const std::uint8_t>> parts);

}  // namespace prefixd::cache
