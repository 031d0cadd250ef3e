// prefixd tests — fixtures for the disk tier: a temporary directory that is removed afterwards,
// records whose sizes are known in advance, and ways to damage a file on disk.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

#include "cache/disk_format.h"

namespace prefixd::testing {

// A fresh, empty directory under the system's temporary directory; removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::random_device random;
    path_ = std::filesystem::temp_directory_path() /
            ("prefixd-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A digest no other call with another (tag, n) returns.
inline cache::Digest test_digest(std::uint8_t tag, int n) {
  cache::Digest d{};
  d[0] = tag;
  for (std::size_t i = 1; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>((n * 31 + static_cast<int>(i) * 7) & 0xff);
  d[1] = static_cast<std::uint8_t>(n);
  d[2] = static_cast<std::uint8_t>(n >> 8);
  return d;
}

// A segment of `tokens` tokens from `begin` (token ids begin, begin + 1, ...) and a payload of
// `payload_bytes` bytes that depend on the key.
inline cache::Record test_segment(const cache::Digest& model, const cache::Digest& key, const cache::Digest& parent,
                                  engine::Pos begin, int tokens, std::size_t payload_bytes) {
  cache::Record r;
  r.meta.kind = cache::RecordKind::segment;
  r.meta.model = model;
  r.meta.ns = test_digest(0xee, 0);
  r.meta.key = key;
  r.meta.parent = parent;
  r.meta.begin = begin;
  for (int i = 0; i < tokens; ++i) r.meta.tokens.push_back(begin + i);
  for (std::size_t i = 0; i < payload_bytes; ++i) r.payload.push_back(static_cast<std::uint8_t>(key[3] + i * 13));
  return r;
}

// A checkpoint at `position`, no tokens.
inline cache::Record test_checkpoint(const cache::Digest& model, const cache::Digest& key, engine::Pos position,
                                     std::size_t payload_bytes) {
  cache::Record r = test_segment(model, key, cache::Digest{}, position, 0, payload_bytes);
  r.meta.kind = cache::RecordKind::checkpoint;
  r.meta.window_from = position / 2;
  return r;
}

// Bytes of the file a record becomes.
inline std::uint64_t record_file_bytes(const cache::Record& r) {
  return cache::kRecordHeaderBytes + r.meta.tokens.size() * 4 + r.payload.size();
}

// The whole record as the store writes it.
inline engine::Bytes encode_record(const cache::Record& r) {
  engine::Bytes out = cache::encode_header(r.meta, r.payload);
  out.insert(out.end(), r.payload.begin(), r.payload.end());
  return out;
}

// Sum of the sizes of the regular files under `dir`.
inline std::uint64_t bytes_under(const std::filesystem::path& dir) {
  std::uint64_t total = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) total += entry.file_size();
  }
  return total;
}

// Regular files under `dir`.
inline int files_under(const std::filesystem::path& dir) {
  int n = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) n += entry.is_regular_file() ? 1 : 0;
  return n;
}

// Flips every bit of the byte at `offset` (from the end when negative) in place.
inline void flip_file_byte(const std::filesystem::path& path, std::int64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!file) throw std::runtime_error("cannot open " + path.string());
  const auto size = static_cast<std::int64_t>(std::filesystem::file_size(path));
  const std::int64_t at = offset < 0 ? size + offset : offset;
  char byte = 0;
  file.seekg(at);
  file.read(&byte, 1);
  byte = static_cast<char>(~byte);
  file.seekp(at);
  file.write(&byte, 1);
}

inline void write_file(const std::filesystem::path& path, const engine::Bytes& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace prefixd::testing
