// prefixd cli — where `prefixd serve` keeps its disk tier, and how large it may grow.
//
// The disk tier is on unless --no-cache-disk: at --cache-disk-path, else at the default location
// ($CACHE_DIRECTORY, which systemd sets for a unit's CacheDirectory=; else $XDG_CACHE_HOME/prefixd;
// else ~/.cache/prefixd). A directory is one server's: the server holds an exclusive lock on
// DIR/lock (with its pid inside) for as long as it runs. A second server given the same
// --cache-disk-path refuses to start; one using the default location takes the first free of DIR,
// DIR/instance-2 … DIR/instance-8, so a restarted server finds its own files again.
// Its size: --cache-disk-max-bytes; else, at the default location, a quarter of what the
// directory's filesystem has free plus what the tier's files already take, at most 16 GiB (a tier
// that would get less than 256 MiB stays off, with a warning); else (a --cache-disk-path) 16 GiB.
// A directory nobody may write in is used without a lock (it is only read).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "util/unique_fd.h"

namespace prefixd::cli {

struct DiskLocation {
  std::filesystem::path dir;
  std::string source;            // how the directory was chosen, for the startup line
  std::uint64_t capacity_bytes = 0;
  std::string capacity_source;   // how the size was chosen
  util::UniqueFd lock;           // held while the server runs
};

struct DiskRequest {
  bool enabled = true;            // false: --no-cache-disk
  std::string path;               // --cache-disk-path; empty: the default location
  std::uint64_t max_bytes = 0;    // --cache-disk-max-bytes; 0: from the free space
};

// The default location; empty when the environment names none (no HOME).
std::filesystem::path default_disk_dir();

// Chooses and locks the directory; nullopt (logged) when the tier stays off. Throws
// std::runtime_error for a --cache-disk-path another process holds or that cannot be created.
std::optional<DiskLocation> choose_disk_location(const DiskRequest& request);

}  // namespace prefixd::cli
