#include "bench/disk_tier.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>
#include "util/unique_fd.h"

namespace prefixd::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using Fd = util::UniqueFd;

// A read-only shared mapping, unmapped when it goes.
class Mapping {
 public:
  Mapping(int fd, std::size_t length)
      : length_(length), address_(::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0)) {}
  ~Mapping() {
    if (ok()) ::munmap(address_, length_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  bool ok() const { return address_ != MAP_FAILED; }
  void* address() const { return address_; }

 private:
  std::size_t length_;
  void* address_;
};

std::string errno_text() { return std::strerror(errno); }

void write_all(int fd, const char* data, std::size_t size, const fs::path& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot write " + path.string() + ": " + errno_text());
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// Bytes that do not compress or deduplicate (a filesystem that did either would flatter the read).
void fill_incompressible(std::vector<char>& buffer, std::uint64_t seed) {
  std::uint64_t x = seed;
  for (std::size_t i = 0; i + sizeof(x) <= buffer.size(); i += sizeof(x)) {
    x += 0x9e3779b97f4a7c15ull;  // splitmix64
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(buffer.data() + i, &z, sizeof(z));
  }
}

template <typename T>
T number_or(const nlohmann::json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<T>() : fallback;
}

template <typename T>
T not_below_zero(T after, T before) {
  return after > before ? after - before : T{};
}

}  // namespace

ScratchDir::ScratchDir(const std::string& parent) {
  const fs::path base = parent.empty() ? fs::temp_directory_path() : fs::path(parent);
  std::string pattern = (base / "prefixd-bench-disk-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a scratch directory in " + base.string() + ": " + errno_text());
  }
  root_ = pattern;
  std::error_code error;
  fs::create_directory(tier(), error);
  if (error) {
    fs::remove_all(root_, error);
    throw std::runtime_error("cannot create " + tier().string());
  }
}

ScratchDir::~ScratchDir() {
  std::error_code error;  // nothing to do about a directory that will not go away
  fs::remove_all(root_, error);
}

nlohmann::json PageCacheDrop::to_json() const {
  return {{"files", files}, {"bytes", bytes}, {"resident_bytes", resident_bytes}, {"failed", failed}};
}

std::optional<std::uint64_t> resident_bytes(const fs::path& path) {
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd.ok() || ::fstat(fd.get(), &st) != 0) return std::nullopt;
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) return 0;
  const Mapping map(fd.get(), size);
  if (!map.ok()) return std::nullopt;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> pages((size + page - 1) / page);
  if (::mincore(map.address(), size, pages.data()) != 0) return std::nullopt;
  std::uint64_t resident = 0;
  for (std::size_t i = 0; i < pages.size(); ++i) {
    if ((pages[i] & 1) != 0) resident += std::min(page, size - i * page);
  }
  return resident;
}

PageCacheDrop drop_page_cache(const fs::path& dir) {
  PageCacheDrop out;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(dir, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    const Fd fd(::open(it->path().c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd.ok() || ::fstat(fd.get(), &st) != 0) {
      ++out.failed;  // removed meanwhile, or unreadable: it cannot be restored from either
      continue;
    }
    // Dirty pages survive DONTNEED: write them out first.
    ::fsync(fd.get());
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
    ++out.files;
    out.bytes += static_cast<std::uint64_t>(st.st_size);
    out.resident_bytes += resident_bytes(it->path()).value_or(0);
  }
  return out;
}

nlohmann::json SequentialRead::to_json() const {
  return {{"bytes", bytes},
          {"seconds", seconds},
          {"bytes_per_second", bytes_per_second()},
          {"resident_before", resident_before},
          {"method", "read(2), 8 MiB blocks, one file, page cache dropped"}};
}

SequentialRead sequential_read(const fs::path& path, std::uint64_t bytes) {
  struct Remove {
    const fs::path& path;
    ~Remove() {
      std::error_code error;
      fs::remove(path, error);
    }
  } remove{path};
  std::vector<char> buffer(kSequentialBlock);
  {
    const Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd.ok()) throw std::runtime_error("cannot create " + path.string() + ": " + errno_text());
    std::uint64_t left = bytes;
    for (std::uint64_t block = 0; left > 0; ++block) {
      fill_incompressible(buffer, block);
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buffer.size()));
      write_all(fd.get(), buffer.data(), n, path);
      left -= n;
    }
    if (::fsync(fd.get()) != 0) throw std::runtime_error("cannot sync " + path.string() + ": " + errno_text());
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  }
  SequentialRead out;
  out.resident_before = resident_bytes(path).value_or(0);
  const auto started = Clock::now();
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.ok()) throw std::runtime_error("cannot open " + path.string() + ": " + errno_text());
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error("cannot read " + path.string() + ": " + errno_text());
    if (n == 0) break;
    out.bytes += static_cast<std::uint64_t>(n);
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (out.bytes != bytes) throw std::runtime_error("read back " + std::to_string(out.bytes) + " of " + std::to_string(bytes) + " bytes");
  return out;
}

nlohmann::json DiskCounters::to_json() const {
  return {{"enabled", enabled},         {"files", files},
          {"bytes", bytes},             {"tokens", tokens},
          {"queue_bytes", queue_bytes}, {"writes", writes},
          {"write_bytes", write_bytes}, {"writes_dropped", writes_dropped},
          {"write_errors", write_errors}, {"reads", reads},
          {"read_bytes", read_bytes},   {"read_seconds", read_seconds},
          {"read_errors", read_errors}, {"hits", hits}};
}

std::optional<DiskCounters> disk_counters(const nlohmann::json& stats) {
  const nlohmann::json::json_pointer where("/tiers/disk");
  if (!stats.is_object() || !stats.contains(where) || !stats.at(where).is_object()) return std::nullopt;
  const nlohmann::json& d = stats.at(where);
  DiskCounters c;
  c.enabled = d.value("enabled", false);
  c.files = number_or<std::int64_t>(d, "entries", 0);
  c.bytes = number_or<std::uint64_t>(d, "bytes", 0);
  c.tokens = number_or<std::int64_t>(d, "tokens", 0);
  c.queue_bytes = number_or<std::uint64_t>(d, "queue_bytes", 0);
  c.writes = number_or<std::int64_t>(d, "writes", 0);
  c.write_bytes = number_or<std::uint64_t>(d, "write_bytes", 0);
  c.writes_dropped = number_or<std::int64_t>(d, "writes_dropped", 0);
  c.write_errors = number_or<std::int64_t>(d, "write_errors", 0);
  c.reads = number_or<std::int64_t>(d, "reads", 0);
  c.read_bytes = number_or<std::uint64_t>(d, "read_bytes", 0);
  c.read_seconds = number_or<double>(d, "read_seconds", 0.0);
  c.read_errors = number_or<std::int64_t>(d, "read_errors", 0);
  c.hits = number_or<std::int64_t>(d, "hits", 0);
  return c;
}

nlohmann::json DiskReads::to_json() const {
  return {{"reads", reads},
          {"read_bytes", bytes},
          {"read_seconds", seconds},
          {"read_bytes_per_second", bytes_per_second()},
          {"read_errors", errors},
          {"hits", hits}};
}

DiskReads reads_between(const DiskCounters& before, const DiskCounters& after) {
  return {.reads = not_below_zero(after.reads, before.reads),
          .bytes = not_below_zero(after.read_bytes, before.read_bytes),
          .seconds = not_below_zero(after.read_seconds, before.read_seconds),
          .errors = not_below_zero(after.read_errors, before.read_errors),
          .hits = not_below_zero(after.hits, before.hits)};
}

nlohmann::json WriteBehind::to_json() const {
  return {{"settled", settled}, {"seconds", seconds}, {"counters", counters.to_json()}};
}

WriteBehind wait_write_behind(const std::function<std::optional<nlohmann::json>()>& read_stats,
                              const WriteBehindTiming& timing) {
  const auto started = Clock::now();
  const auto deadline = started + timing.limit;
  WriteBehind out;
  std::optional<DiskCounters> previous;
  auto stable_since = started;
  auto same_writes = [](const DiskCounters& a, const DiskCounters& b) {
    return a.writes == b.writes && a.write_bytes == b.write_bytes && a.writes_dropped == b.writes_dropped &&
           a.write_errors == b.write_errors && a.files == b.files;
  };
  for (;;) {
    const auto stats = read_stats();
    const auto now = Clock::now();
    out.seconds = std::chrono::duration<double>(now - started).count();
    const auto counters = stats ? disk_counters(*stats) : std::nullopt;
    if (!counters || !counters->enabled) {
      out.settled = true;  // no disk tier: nothing is written behind
      return out;
    }
    out.counters = *counters;
    if (counters->queue_bytes != 0 || !previous || !same_writes(*previous, *counters)) stable_since = now;
    previous = counters;
    if (now - stable_since >= timing.settle) {
      out.settled = true;
      return out;
    }
    if (now >= deadline) return out;
    std::this_thread::sleep_for(timing.poll);
  }
}

}  // namespace prefixd::bench
