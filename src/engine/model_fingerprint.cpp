#include "engine/model_fingerprint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "util/progress_log.h"

#include "util/hex.h"
#include "util/unique_fd.h"

namespace prefixd::engine {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kReadChunk = 8u << 20;
constexpr std::size_t kDigestHexChars = 32;

using FileDescriptor = util::UniqueFd;

struct Xxh3StateDeleter {
  void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
};

std::runtime_error read_error(const fs::path& path, int error) {
  return std::runtime_error("cannot read model file '" + path.string() + "': " + std::strerror(error));
}

// What says a file is unchanged since it was hashed. ctime and the inode are there besides size
// and mtime because both survive what mtime alone does not: an in-place rewrite that restores the
// mtime (rsync --inplace, touch -r), or a file of the same size renamed over this one with its
// mtime preserved (cp -p, rsync).
struct FileKey {
  std::string path;  // canonical
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  std::uint64_t inode = 0;
  bool operator==(const FileKey&) const = default;
};

std::int64_t nanoseconds(const timespec& t) {
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + static_cast<std::int64_t>(t.tv_nsec);
}

std::optional<FileKey> key_of(const std::string& canonical_path) {
  struct stat st {};
  if (::stat(canonical_path.c_str(), &st) != 0) return std::nullopt;
  return FileKey{.path = canonical_path,
                 .size = static_cast<std::uint64_t>(st.st_size),
                 .mtime_ns = nanoseconds(st.st_mtim),
                 .ctime_ns = nanoseconds(st.st_ctim),
                 .inode = static_cast<std::uint64_t>(st.st_ino)};
}

// One line of the cache file: algorithm, digest, size, mtime ns, ctime ns, inode, path. The path
// comes last so that it may itself contain tabs.
struct CacheLine {
  std::string algorithm;
  std::string digest;
  FileKey key;
};

template <typename T>
bool parse_number(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool is_digest(std::string_view text) {
  return text.size() == kDigestHexChars &&
         text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::optional<CacheLine> parse_line(std::string_view line) {
  std::string_view fields[6];
  for (std::string_view& field : fields) {
    const std::size_t tab = line.find('\t');
    if (tab == std::string_view::npos) return std::nullopt;
    field = line.substr(0, tab);
    line.remove_prefix(tab + 1);
  }
  CacheLine parsed;
  parsed.algorithm = fields[0];
  parsed.digest = fields[1];
  parsed.key.path = line;
  if (parsed.algorithm.empty() || parsed.digest.empty() || parsed.key.path.empty() ||
      !parse_number(fields[2], parsed.key.size) || !parse_number(fields[3], parsed.key.mtime_ns) ||
      !parse_number(fields[4], parsed.key.ctime_ns) || !parse_number(fields[5], parsed.key.inode)) {
    return std::nullopt;
  }
  // Another algorithm's digests are kept for whoever wrote them, but this one's must look right.
  if (parsed.algorithm == kFingerprintAlgorithm && !is_digest(parsed.digest)) return std::nullopt;
  return parsed;
}

std::string format_line(const CacheLine& line) {
  return line.algorithm + '\t' + line.digest + '\t' + std::to_string(line.key.size) + '\t' +
         std::to_string(line.key.mtime_ns) + '\t' + std::to_string(line.key.ctime_ns) + '\t' +
         std::to_string(line.key.inode) + '\t' + line.key.path;
}

// Every well-formed line of the file; a missing or unreadable file has none.
std::vector<CacheLine> load_lines(const fs::path& file) {
  std::vector<CacheLine> lines;
  std::ifstream in(file, std::ios::binary);
  std::string text;
  while (std::getline(in, text)) {
    if (text.empty() || text.front() == '#') continue;
    if (auto parsed = parse_line(text)) lines.push_back(std::move(*parsed));
  }
  return lines;
}

// Writes the file through a temporary one renamed over it, so a reader never sees half of it.
void store_lines(const fs::path& file, const std::vector<CacheLine>& lines) {
  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  const fs::path temporary = file.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << "# prefixd model fingerprints: algorithm, digest, size, mtime ns, ctime ns, inode, path\n";
    for (const CacheLine& line : lines) out << format_line(line) << '\n';
    out.close();
    if (!out) {
      fs::remove(temporary, ec);
      spdlog::debug("model fingerprint cache: cannot write {}", temporary.string());
      return;
    }
  }
  fs::rename(temporary, file, ec);
  if (ec) {
    spdlog::debug("model fingerprint cache: cannot replace {}: {}", file.string(), ec.message());
    fs::remove(temporary, ec);
  }
}

}  // namespace

std::string hash_model_file(const fs::path& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw read_error(path, errno);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  std::unique_ptr<XXH3_state_t, Xxh3StateDeleter> state(XXH3_createState());
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) throw std::runtime_error("cannot create an XXH3 state");
  const auto buffer = std::make_unique_for_overwrite<std::byte[]>(kReadChunk);
  struct stat st{};
  const double mib = ::fstat(fd.get(), &st) == 0 ? static_cast<double>(st.st_size) / (1 << 20) : 0;
  util::ProgressLog progress("fingerprinting " + path.filename().string(), "MiB", mib);
  std::uint64_t read = 0;
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer.get(), kReadChunk);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw read_error(path, errno);
    }
    XXH3_128bits_update(state.get(), buffer.get(), static_cast<std::size_t>(n));
    read += static_cast<std::uint64_t>(n);
    progress.update(static_cast<double>(read) / (1 << 20));
  }
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state.get()));
  return util::to_hex(std::span<const std::uint8_t>(canonical.digest, sizeof canonical.digest));
}

FingerprintCache::FingerprintCache(fs::path file) : file_(std::move(file)) {}

FileFingerprint FingerprintCache::fingerprint(const fs::path& model_path) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(model_path, ec);
  if (ec) throw std::runtime_error("cannot read model file '" + model_path.string() + "': " + ec.message());
  const std::optional<FileKey> before = key_of(canonical.string());
  if (!before) throw read_error(canonical, errno);

  if (!file_.empty()) {
    for (const CacheLine& line : load_lines(file_)) {
      if (line.algorithm == kFingerprintAlgorithm && line.key == *before) {
        return FileFingerprint{.digest = line.digest, .from_cache = true};
      }
    }
  }

  const auto started = std::chrono::steady_clock::now();
  FileFingerprint computed{.digest = hash_model_file(canonical)};
  computed.hash_time = std::chrono::steady_clock::now() - started;
  ++files_hashed_;

  // A file written while it was read has no digest worth remembering.
  if (file_.empty() || key_of(canonical.string()) != before) return computed;
  // A line holds one path; a path with a line break in it is hashed on every start.
  if (before->path.find_first_of("\n\r") != std::string::npos) return computed;
  // Re-read: another server may have added entries since the lookup.
  std::vector<CacheLine> lines = load_lines(file_);
  std::erase_if(lines, [&](const CacheLine& line) {
    return line.algorithm == kFingerprintAlgorithm && line.key.path == before->path;
  });
  lines.push_back(CacheLine{.algorithm = kFingerprintAlgorithm, .digest = computed.digest, .key = *before});
  store_lines(file_, lines);
  return computed;
}

fs::path default_fingerprint_cache_path(const std::optional<fs::path>& disk_dir) {
  constexpr const char* kFileName = "model-fingerprints.tsv";
  if (disk_dir && !disk_dir->empty()) return *disk_dir / kFileName;
  // The XDG base directory specification says a relative path there is to be ignored.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && fs::path(xdg).is_absolute()) {
    return fs::path(xdg) / "prefixd" / kFileName;
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return fs::path(home) / ".cache" / "prefixd" / kFileName;
  }
  return {};
}

}  // namespace prefixd::engine
