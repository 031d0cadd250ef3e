// prefixd cache — a disk tier directory seen as files: where a record's file lives, what is under
// DIR/kv, and which files the byte cap takes first. Both the store (index rebuild) and the
// `prefixd cache` tool walk a directory through here, so they agree on what a usable file is.
//
// Nothing here removes or writes a file: what to do with a bad or surplus file is the caller's
// decision (the store removes them; the tool only reports them unless asked).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "cache/disk_format.h"

namespace prefixd::cache {

// ".seg" for segments, ".ckpt" for checkpoints.
const char* record_extension(RecordKind kind);
// DIR/kv/<first 2 hex digits>/<key hex><extension>.
std::filesystem::path record_path(const std::filesystem::path& dir, const Digest& key, RecordKind kind);

// The header (fixed part and token ids) of an open record file of `file_bytes` bytes, checked
// by decode_header; reads nothing of the payload.
DecodedHeader read_record_header(int fd, std::uint64_t file_bytes, const Digest* model);

// One record file under DIR/kv.
struct DiskFile {
  std::filesystem::path path;
  std::uint64_t bytes = 0;
  // The file's mtime: set when written and refreshed by every verified read, so it is the last
  // use that survives a restart (the store's LRU order at startup).
  std::chrono::system_clock::time_point last_use;
  // Header and token ids checked against `model`; a file whose name is not its key's (renamed or
  // copied over another file's name) is `checksum`, with `misnamed` set and `header.meta` intact.
  DecodedHeader header;
  bool misnamed = false;
};

// The file at `path` with its header read and checked as list_disk_files does; nullopt when it
// cannot be opened.
std::optional<DiskFile> open_disk_file(const std::filesystem::path& path, const Digest* model);

// Every regular *.seg and *.ckpt file under DIR/kv, in directory order, with its header read
// and checked (`model` nullptr: every model's records are usable). Files that cannot be opened
// are left out. Reads headers only. `progress`, when given, is called after each file with the
// files read so far and the files found (the store logs it at startup).
using ListProgress = std::function<void(std::size_t read, std::size_t found)>;
std::vector<DiskFile> list_disk_files(const std::filesystem::path& dir, const Digest* model,
                                      const ListProgress& progress = {});

// Reads all of the file at `path` and checks it as a record: header, token ids, size, payload
// checksum (decode_record) — not its name. `truncated` when it cannot be read.
RecordFault check_record_file(const std::filesystem::path& path, const Digest* model);
// check_record_file, and that the file's name is its key's: the checks of the store's read.
// `none` when every check passes.
RecordFault verify_disk_file(const DiskFile& file, const Digest* model);

// The store's cap policy on a listing: indexes into `files` of the files to remove, in order, so
// that the usable files (header fault `none`) take at most `max_bytes`. Least recently used first,
// but never a segment that another remaining segment extends (its parent is that segment's key):
// leaves go before the prefixes they depend on. Files with a fault are neither counted nor
// chosen. When every remaining file is a prefix of another (cannot happen without a cycle) the
// plan stops short.
std::vector<std::size_t> plan_trim(std::span<const DiskFile> files, std::uint64_t max_bytes);

}  // namespace prefixd::cache
