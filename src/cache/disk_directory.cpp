#include "cache/disk_directory.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>
#include <unordered_map>

#include <fcntl.h>
#include <sys/stat.h>

#include "cache/file_io.h"

namespace prefixd::cache {
namespace fs = std::filesystem;

namespace {

std::chrono::system_clock::time_point mtime_of(const struct stat& st) {
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

// A file holds the record its name promises: DIR/kv/xx/<key hex><its kind's extension>.
bool named_for(const fs::path& path, const RecordMeta& meta) {
  return path.stem().string() == to_hex(meta.key) && path.extension().string() == record_extension(meta.kind);
}

}  // namespace

const char* record_extension(RecordKind kind) { return kind == RecordKind::segment ? ".seg" : ".ckpt"; }

fs::path record_path(const fs::path& dir, const Digest& key, RecordKind kind) {
  const std::string hex = to_hex(key);
  return dir / "kv" / hex.substr(0, 2) / (hex + record_extension(kind));
}

DecodedHeader read_record_header(int fd, std::uint64_t file_bytes, const Digest* model) {
  engine::Bytes head(std::min<std::uint64_t>(file_bytes, kRecordHeaderBytes));
  if (!read_exact(fd, head.data(), head.size(), 0)) return DecodedHeader{RecordFault::truncated};
  if (const auto size = header_size(head); size && *size <= file_bytes && *size > head.size()) {
    const std::size_t fixed = head.size();
    head.resize(*size);
    if (!read_exact(fd, head.data() + fixed, *size - fixed, static_cast<off_t>(fixed))) {
      return DecodedHeader{RecordFault::truncated};
    }
  }
  return decode_header(head, model, file_bytes);
}

std::optional<DiskFile> open_disk_file(const fs::path& path, const Digest* model) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st{};
  if (!fd.ok() || ::fstat(fd.get(), &st) != 0) return std::nullopt;
  DiskFile file{path, static_cast<std::uint64_t>(st.st_size), mtime_of(st), {}, false};
  file.header = read_record_header(fd.get(), file.bytes, model);
  if (file.header.fault == RecordFault::none && !named_for(path, file.header.meta)) {
    file.header.fault = RecordFault::checksum;
    file.misnamed = true;
  }
  return file;
}

std::vector<DiskFile> list_disk_files(const fs::path& dir, const Digest* model, const ListProgress& progress) {
  // Names first (cheap), then headers, so that progress knows the total.
  std::vector<fs::path> paths;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir / "kv", ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string ext = it->path().extension().string();
    if (!it->is_regular_file(ec) || (ext != ".seg" && ext != ".ckpt")) continue;
    paths.push_back(it->path());
  }
  std::vector<DiskFile> out;
  out.reserve(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (std::optional<DiskFile> file = open_disk_file(paths[i], model)) out.push_back(std::move(*file));
    if (progress) progress(i + 1, paths.size());
  }
  return out;
}

namespace {

// The whole file decoded as a record (its payload included).
DecodedRecord read_record_file(const fs::path& path, const Digest* model) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st{};
  if (!fd.ok() || ::fstat(fd.get(), &st) != 0) return DecodedRecord{RecordFault::truncated};
  engine::Bytes bytes(static_cast<std::size_t>(st.st_size));
  if (!read_exact(fd.get(), bytes.data(), bytes.size(), 0)) return DecodedRecord{RecordFault::truncated};
  return decode_record(bytes, model);
}

}  // namespace

RecordFault check_record_file(const fs::path& path, const Digest* model) { return read_record_file(path, model).fault; }

RecordFault verify_disk_file(const DiskFile& file, const Digest* model) {
  const DecodedRecord record = read_record_file(file.path, model);
  if (record.fault != RecordFault::none) return record.fault;
  return named_for(file.path, record.record.meta) ? RecordFault::none : RecordFault::checksum;
}

std::vector<std::size_t> plan_trim(std::span<const DiskFile> files, std::uint64_t max_bytes) {
  std::uint64_t total = 0;
  std::unordered_map<Digest, std::size_t, DigestHash> by_key;
  std::unordered_map<Digest, std::int32_t, DigestHash> children;  // remaining segments per parent
  for (std::size_t i = 0; i < files.size(); ++i) {
    const DecodedHeader& h = files[i].header;
    if (h.fault != RecordFault::none) continue;
    total += files[i].bytes;
    by_key.emplace(h.meta.key, i);
    if (h.meta.kind == RecordKind::segment) children[h.meta.parent] += 1;
  }
  // Files nothing extends, oldest on top. A segment's removal may free its parent, which then
  // competes at its own last use — so the order is the store's "least recently used among the
  // removable" at every step.
  using Candidate = std::tuple<std::chrono::system_clock::time_point, std::string, std::size_t>;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> removable;
  const auto offer = [&](std::size_t i) {
    removable.emplace(files[i].last_use, files[i].path.string(), i);  // the path breaks ties stably
  };
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (files[i].header.fault == RecordFault::none && !children.contains(files[i].header.meta.key)) offer(i);
  }
  std::vector<std::size_t> out;
  while (total > max_bytes && !removable.empty()) {
    const std::size_t i = std::get<2>(removable.top());
    removable.pop();
    out.push_back(i);
    total -= files[i].bytes;
    const RecordMeta& meta = files[i].header.meta;
    if (meta.kind != RecordKind::segment) continue;
    if (auto parent = children.find(meta.parent); parent != children.end() && --parent->second == 0) {
      children.erase(parent);
      if (auto p = by_key.find(meta.parent); p != by_key.end()) offer(p->second);
    }
  }
  return out;
}

}  // namespace prefixd::cache
