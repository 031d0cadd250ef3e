// prefixd engine — the identity of a model file: a digest of every byte of the GGUF (metadata and
// tensor data), so two files with equal shapes and different weights never share K/V, and the same
// file means the same thing in another process or on another server.
//
// Hashing a multi-GB file costs seconds, so digests are remembered in a small text file keyed by
// the file's canonical path, size, modification time, change time and inode: a restart of an
// unchanged model reads the digest back instead of rehashing.
// Must not know: llama.h, the prompt cache.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace prefixd::engine {

// The digest algorithm's name, written into every cache line: a line of another algorithm is
// never read as this one's.
inline constexpr const char* kFingerprintAlgorithm = "xxh3-128";

// XXH3-128 over every byte of the file, as 32 lowercase hex characters. Read in 8 MiB chunks, so a
// large file hashes at about disk (or page cache) speed. Throws std::runtime_error when the file
// cannot be read.
std::string hash_model_file(const std::filesystem::path& path);

struct FileFingerprint {
  std::string digest;                    // hash_model_file's hex string
  bool from_cache = false;               // read from the cache file rather than computed
  std::chrono::nanoseconds hash_time{};  // time spent hashing; zero when from_cache
};

// Fingerprints files, remembering digests in a text file (one tab-separated line per file:
// algorithm, digest, size, mtime ns, ctime ns, inode, canonical path). The file is re-read on
// every lookup and rewritten atomically (a temporary file renamed over it) with the entries of
// other paths kept, so several servers may share it; when two write at once one entry may be lost,
// which costs only a rehash. A missing or unreadable file is empty, a malformed line is ignored,
// and a file that cannot be written is logged at debug level: the cache never fails a lookup.
class FingerprintCache {
 public:
  // `file` empty: nothing is remembered between lookups (every lookup hashes).
  explicit FingerprintCache(std::filesystem::path file);

  // The digest of `model_path`. Throws std::runtime_error when the model file cannot be read.
  FileFingerprint fingerprint(const std::filesystem::path& model_path);

  // Files this object hashed (lookups the cache file did not answer).
  std::uint64_t files_hashed() const { return files_hashed_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::uint64_t files_hashed_ = 0;
};

// Where `prefixd serve` keeps the cache file unless told otherwise: `disk_dir`/model-fingerprints.tsv
// when a disk tier directory is given, else $XDG_CACHE_HOME/prefixd/model-fingerprints.tsv, else
// $HOME/.cache/prefixd/model-fingerprints.tsv; empty when none of these is known.
std::filesystem::path default_fingerprint_cache_path(const std::optional<std::filesystem::path>& disk_dir);

}  // namespace prefixd::engine
