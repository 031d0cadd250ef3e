#include "cli/disk_location.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <format>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include <spdlog/spdlog.h>

namespace prefixd::cli {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMaxDefaultBytes = 16ull << 30;
constexpr std::uint64_t kMinDefaultBytes = 256ull << 20;
constexpr int kDefaultInstances = 8;

// The pid another server wrote into the lock file ("" when unreadable).
std::string holder_of(const fs::path& lock_path) {
  std::ifstream in(lock_path);
  std::string pid;
  in >> pid;
  return pid;
}

// Creates `dir` and takes its lock; an invalid descriptor when another process holds it. A
// directory nobody may write in (read-only, or not ours) gets no lock: no server can change files
// there, and the tier reads what it finds. Throws std::runtime_error when the directory cannot be
// made or its lock file opened for another reason.
util::UniqueFd lock_dir(const fs::path& dir, const std::string& flag, bool& unlocked) {
  unlocked = false;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(std::format("{} {}: {}", flag, dir.string(), ec.message()));
  const fs::path lock_path = dir / "lock";
  util::UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.ok() && (errno == EROFS || errno == EACCES || errno == EPERM)) {
    spdlog::warn("disk tier {}: cannot create {} ({}): its files are read, none written, and no lock keeps another "
                 "server out", dir.string(), lock_path.string(), std::error_code(errno, std::generic_category()).message());
    unlocked = true;
    return fd;
  }
  if (!fd.ok()) {
    throw std::runtime_error(std::format("{} {}: cannot open {}: {}", flag, dir.string(), lock_path.string(),
                                         std::error_code(errno, std::generic_category()).message()));
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return {};
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd.get(), pid.data(), pid.size(), 0);
  }
  return fd;
}

// Bytes of the tier's files already there (they count as room the tier has).
std::uint64_t bytes_under(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir / "kv", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) total += it->file_size(size_ec);
  }
  return total;
}

}  // namespace

fs::path default_disk_dir() {
  // systemd's CacheDirectory= (a service), then the XDG base directory specification (a user): a
  // relative path there is to be ignored.
  if (const char* unit = std::getenv("CACHE_DIRECTORY"); unit != nullptr && fs::path(unit).is_absolute()) {
    // Several directories are separated by colons: the first is the unit's own.
    const std::string first = std::string(unit).substr(0, std::string(unit).find(':'));
    return fs::path(first);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && fs::path(xdg).is_absolute()) {
    return fs::path(xdg) / "prefixd";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return fs::path(home) / ".cache" / "prefixd";
  }
  return {};
}

std::optional<DiskLocation> choose_disk_location(const DiskRequest& request) {
  if (!request.enabled) return std::nullopt;
  DiskLocation where;
  if (!request.path.empty()) {
    where.dir = request.path;
    where.source = "--cache-disk-path";
    bool unlocked = false;
    where.lock = lock_dir(where.dir, "--cache-disk-path", unlocked);
    if (!where.lock.ok() && !unlocked) {
      const std::string pid = holder_of(where.dir / "lock");
      throw std::runtime_error(std::format(
          "--cache-disk-path {}: another prefixd{} uses this directory; give each server its own", where.dir.string(),
          pid.empty() ? "" : " (pid " + pid + ")"));
    }
  } else {
    const fs::path base = default_disk_dir();
    if (base.empty()) {
      spdlog::warn("disk tier: off (no CACHE_DIRECTORY, XDG_CACHE_HOME or HOME to put it in; give --cache-disk-path)");
      return std::nullopt;
    }
    for (int instance = 1; instance <= kDefaultInstances && !where.lock.ok(); ++instance) {
      where.dir = instance == 1 ? base : base / std::format("instance-{}", instance);
      try {
        bool unlocked = false;
        where.lock = lock_dir(where.dir, "disk tier", unlocked);
        if (unlocked) {
          spdlog::warn("disk tier: off ({} cannot be written); give --cache-disk-path", where.dir.string());
          return std::nullopt;
        }
      } catch (const std::runtime_error& e) {
        spdlog::warn("disk tier: off ({}); give --cache-disk-path", e.what());
        return std::nullopt;
      }
    }
    if (!where.lock.ok()) {
      spdlog::warn("disk tier: off ({} servers already use {} and its instance-N directories; give --cache-disk-path)",
                   kDefaultInstances, base.string());
      return std::nullopt;
    }
    where.source = where.dir == base ? "the default location"
                                     : std::format("the default location's first free instance ({} is in use)", base.string());
  }
  if (request.max_bytes > 0) {
    where.capacity_bytes = request.max_bytes;
    where.capacity_source = "--cache-disk-max-bytes";
    return where;
  }
  if (!request.path.empty()) {
    // A directory the operator chose: the fixed default, whatever the free space (a full disk is
    // counted as write errors, as ever).
    where.capacity_bytes = kMaxDefaultBytes;
    where.capacity_source = "the default for a --cache-disk-path";
    return where;
  }
  std::error_code ec;
  const fs::space_info space = fs::space(where.dir, ec);
  const std::uint64_t own = bytes_under(where.dir);
  const std::uint64_t room = ec ? 0 : space.available + own;
  where.capacity_bytes = std::min(kMaxDefaultBytes, room / 4);
  where.capacity_source = std::format("a quarter of the {:.1f} GiB free there and its own files, at most 16 GiB",
                                      static_cast<double>(room) / (1ull << 30));
  if (where.capacity_bytes < kMinDefaultBytes) {
    spdlog::warn("disk tier: off ({} has {:.0f} MiB free; a quarter of it is too little; give --cache-disk-max-bytes)",
                 where.dir.string(), static_cast<double>(room) / (1 << 20));
    return std::nullopt;
  }
  return where;
}

}  // namespace prefixd::cli
