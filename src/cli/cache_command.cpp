// `prefixd cache`: a disk tier directory seen from outside the server — list its files, inspect
// one, verify every checksum, trim it to a size.
//
// The tool reads with the store's own rules (cache/disk_directory.h) but never opens a DiskStore:
// the store's constructor removes what it cannot use, and `ls`, `inspect` and `verify` without
// `--remove` must leave the directory exactly as they found it. Every model's records are
// accepted (the tool does not know which model a server will load).
#include <algorithm>
#include <cctype>
#include <format>
#include <iostream>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "cache/disk_directory.h"
#include "cli/commands.h"

namespace prefixd::cli {
namespace {

namespace fs = std::filesystem;
using cache::DiskFile;
using cache::RecordFault;
using cache::RecordKind;
using cache::RecordMeta;
using Time = std::chrono::system_clock::time_point;

struct CacheOptions {
  std::string dir;
  bool json = false;           // ls
  std::string target;          // inspect: a key (or a prefix of one) or a file path
  bool all_tokens = false;     // inspect
  bool remove = false;         // verify
  std::uint64_t max_bytes = 0;  // gc
};

std::string hex16(const cache::Digest& digest) { return cache::to_hex(digest).substr(0, 16); }
std::string iso_utc(Time t) { return std::format("{:%FT%TZ}", std::chrono::floor<std::chrono::seconds>(t)); }
std::int64_t unix_ms(Time t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
std::string mib(std::uint64_t bytes) { return std::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

// The directory named by --cache-disk-path, which must exist: the tool never creates one.
fs::path existing_dir(const std::string& dir) {
  if (dir.empty()) throw std::runtime_error("no directory: pass --cache-disk-path DIR or set PREFIXD_CACHE_DISK_PATH");
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (!fs::exists(status)) throw std::runtime_error(dir + " does not exist");
  if (!fs::is_directory(status)) throw std::runtime_error(dir + " is not a directory");
  return dir;
}

std::vector<DiskFile> newest_first(const fs::path& dir) {
  std::vector<DiskFile> files = cache::list_disk_files(dir, nullptr);
  std::ranges::sort(files, [](const DiskFile& a, const DiskFile& b) {
    return a.last_use != b.last_use ? a.last_use > b.last_use : a.path < b.path;
  });
  return files;
}

bool usable(const DiskFile& f) { return f.header.fault == RecordFault::none; }

nlohmann::json file_json(const DiskFile& f) {
  nlohmann::json j = {{"path", f.path.string()},        {"bytes", f.bytes},
                      {"last_use", iso_utc(f.last_use)}, {"last_use_unix_ms", unix_ms(f.last_use)},
                      {"fault", cache::record_fault_name(f.header.fault)}};
  if (!usable(f)) return j;
  const RecordMeta& m = f.header.meta;
  j["kind"] = cache::record_kind_name(m.kind);
  j["key"] = cache::to_hex(m.key);
  j["model"] = cache::to_hex(m.model);
  j["namespace"] = cache::to_hex(m.ns);
  j["scope"] = cache::to_hex(m.scope);
  j["begin"] = m.begin;
  if (m.kind == RecordKind::segment) {
    j["parent"] = cache::to_hex(m.parent);
    j["tokens"] = m.tokens.size();
  } else {
    j["position"] = m.begin;
    j["window_from"] = m.window_from;
  }
  j["payload_bytes"] = m.payload_bytes;
  j["created_unix_ms"] = m.created_unix_ms;
  return j;
}

int run_ls(const CacheOptions& o) {
  const std::vector<DiskFile> files = newest_first(existing_dir(o.dir));
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const DiskFile& f : files) out.push_back(file_json(f));
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::uint64_t bytes = 0;
  std::int64_t tokens = 0, segments = 0, checkpoints = 0, invalid = 0;
  std::cout << std::format("{:<10} {:<16} {:>8} {:>7} {:>12}  {:<20}  {}\n", "KIND", "KEY", "POSITION", "TOKENS",
                           "BYTES", "LAST_USE", "MODEL");
  for (const DiskFile& f : files) {
    bytes += f.bytes;
    if (!usable(f)) {
      invalid += 1;
      std::cout << std::format("{:<10} {:<16} {:>8} {:>7} {:>12}  {:<20}  ({}: {})\n", "invalid",
                               f.path.stem().string().substr(0, 16), "-", "-", f.bytes, iso_utc(f.last_use),
                               cache::record_fault_name(f.header.fault), f.path.string());
      continue;
    }
    const RecordMeta& m = f.header.meta;
    const bool segment = m.kind == RecordKind::segment;
    (segment ? segments : checkpoints) += 1;
    tokens += static_cast<std::int64_t>(m.tokens.size());
    std::cout << std::format("{:<10} {:<16} {:>8} {:>7} {:>12}  {:<20}  {}\n", cache::record_kind_name(m.kind),
                             hex16(m.key), m.begin, segment ? std::to_string(m.tokens.size()) : "-", f.bytes,
                             iso_utc(f.last_use), hex16(m.model));
  }
  std::cout << std::format("total: {} files ({} segments, {} checkpoints, {} invalid), {} bytes ({}), {} tokens\n",
                           files.size(), segments, checkpoints, invalid, bytes, mib(bytes), tokens);
  return 0;
}

// A file path as given, or the one file under DIR whose name starts with a key's hex prefix.
fs::path resolve_target(const CacheOptions& o) {
  std::error_code ec;
  if (fs::is_regular_file(o.target, ec)) return o.target;
  std::string prefix = o.target;
  std::ranges::transform(prefix, prefix.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto hex = [](unsigned char c) { return std::isxdigit(c) != 0; };
  if (prefix.empty() || prefix.size() > 64 || !std::ranges::all_of(prefix, hex)) {
    throw std::runtime_error("'" + o.target + "' is neither a file nor a key (hex digits)");
  }
  const fs::path dir = existing_dir(o.dir);
  std::vector<fs::path> matches;
  for (const DiskFile& f : cache::list_disk_files(dir, nullptr)) {
    if (f.path.stem().string().starts_with(prefix)) matches.push_back(f.path);
  }
  if (matches.empty()) throw std::runtime_error("no file in " + dir.string() + " has a key starting with " + prefix);
  if (matches.size() > 1) {
    std::string names;
    for (const fs::path& p : matches) names += "\n  " + p.filename().string();
    throw std::runtime_error(std::format("key prefix {} is ambiguous: {} files match{}", prefix, matches.size(), names));
  }
  return matches.front();
}

int run_inspect(const CacheOptions& o) {
  const fs::path path = resolve_target(o);
  const std::optional<DiskFile> file = cache::open_disk_file(path, nullptr);
  if (!file) throw std::runtime_error("cannot open " + path.string());
  const RecordFault header_fault = file->header.fault;
  const auto row = [](std::string_view name, const std::string& value) {
    std::cout << std::format("{:<18}{}\n", name, value);
  };
  row("path", path.string());
  row("file bytes", std::to_string(file->bytes));
  row("last use", iso_utc(file->last_use) + " (mtime)");
  if (header_fault != RecordFault::none && !file->misnamed) {
    row("header", std::string("does not verify: ") + cache::record_fault_name(header_fault));
    if (file->header.header_checksum != 0) {  // the fixed part was read: say what it claims
      row("header checksum", std::format("{:016x} as stored (XXH3-64 of header and token ids)", file->header.header_checksum));
    }
    return 1;
  }
  const RecordMeta& m = file->header.meta;
  row("header", file->misnamed ? "verifies, but the file's name is not its key's" : "verifies");
  row("format version", std::to_string(cache::kDiskFormatVersion));
  row("kind", cache::record_kind_name(m.kind));
  row("key", cache::to_hex(m.key));
  row("model", cache::to_hex(m.model));
  row("namespace", cache::to_hex(m.ns));
  row("scope", cache::to_hex(m.scope));
  row("parent", cache::to_hex(m.parent));
  if (m.kind == RecordKind::segment) {
    row("begin", std::to_string(m.begin));
  } else {
    row("position", std::to_string(m.begin));
    row("window from", std::to_string(m.window_from));
  }
  const std::size_t shown = o.all_tokens ? m.tokens.size() : std::min<std::size_t>(m.tokens.size(), 32);
  std::string tokens = std::to_string(m.tokens.size());
  for (std::size_t i = 0; i < shown; ++i) tokens += (i == 0 ? ": " : " ") + std::to_string(m.tokens[i]);
  if (shown < m.tokens.size()) tokens += std::format(" ... ({} more; --tokens prints all)", m.tokens.size() - shown);
  row("tokens", tokens);
  row("created", iso_utc(Time(std::chrono::milliseconds(m.created_unix_ms))) +
                     std::format(" ({} ms since the epoch)", m.created_unix_ms));
  row("payload bytes", std::to_string(m.payload_bytes));
  const RecordFault whole = cache::check_record_file(path, nullptr);  // the payload: the header verified
  const bool payload_ok = whole == RecordFault::none;
  row("payload checksum", std::format("{:016x} (XXH3-64) {}", m.payload_checksum,
                                      payload_ok ? "matches" : std::string("FAILS: ") + cache::record_fault_name(whole)));
  row("header checksum", std::format("{:016x} (XXH3-64 of header and token ids) matches", file->header.header_checksum));
  return file->misnamed || !payload_ok ? 1 : 0;
}

int run_verify(const CacheOptions& o) {
  const fs::path dir = existing_dir(o.dir);
  std::int64_t bad = 0, removed = 0;
  std::uint64_t bytes = 0;
  const std::vector<DiskFile> files = cache::list_disk_files(dir, nullptr);
  for (const DiskFile& f : files) {
    bytes += f.bytes;
    const RecordFault fault = usable(f) ? cache::verify_disk_file(f, nullptr) : f.header.fault;
    if (fault == RecordFault::none) continue;
    bad += 1;
    std::error_code ec;
    const bool gone = o.remove && fs::remove(f.path, ec);
    removed += gone ? 1 : 0;
    std::cout << std::format("bad  {:<10} {}{}\n", cache::record_fault_name(fault), f.path.string(),
                             gone ? "  (removed)" : (ec ? " (not removed: " + ec.message() + ")" : ""));
  }
  std::int64_t leftovers = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir / "tmp", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    leftovers += 1;
  }
  std::cout << std::format("verify: {} files, {} bytes: {} ok, {} bad", files.size(), bytes,
                           static_cast<std::int64_t>(files.size()) - bad, bad);
  if (o.remove) {
    std::cout << std::format(", {} removed\n", removed);
  } else {
    std::cout << (bad > 0 ? " (--remove deletes them)\n" : "\n");
  }
  if (leftovers > 0) {
    std::cout << std::format("note: {} temporary files in {} (writes in flight, or left by a crash; a server removes "
                             "them when it opens the directory)\n", leftovers, (dir / "tmp").string());
  }
  return bad > 0 ? 1 : 0;
}

int run_gc(const CacheOptions& o) {
  const fs::path dir = existing_dir(o.dir);
  const std::vector<DiskFile> files = cache::list_disk_files(dir, nullptr);
  std::uint64_t total = 0, freed = 0;
  std::int64_t removed = 0, failed = 0;
  const auto remove = [&](const DiskFile& f, const std::string& why) {
    std::error_code ec;
    if (!fs::remove(f.path, ec)) {
      failed += 1;
      std::cerr << "prefixd cache gc: cannot remove " << f.path.string() << ": " << ec.message() << "\n";
      return false;
    }
    removed += 1;
    freed += f.bytes;
    std::cout << std::format("removed  {:<22} {:>12}  {:<20}  {}\n", why, f.bytes, iso_utc(f.last_use), f.path.string());
    return true;
  };
  // Files a server would refuse go first, whatever the limit: they hold space and nothing else.
  for (const DiskFile& f : files) {
    if (!usable(f)) {
      if (!remove(f, std::string("invalid (") + cache::record_fault_name(f.header.fault) + ")")) total += f.bytes;
    } else {
      total += f.bytes;
    }
  }
  for (std::size_t i : cache::plan_trim(files, o.max_bytes)) {
    const RecordMeta& m = files[i].header.meta;
    if (remove(files[i], std::format("{} {}", cache::record_kind_name(m.kind), hex16(m.key)))) total -= files[i].bytes;
  }
  std::cout << std::format("gc: removed {} files ({} bytes); {} bytes ({}) remain, limit {} bytes\n", removed, freed,
                           total, mib(total), o.max_bytes);
  return failed > 0 || total > o.max_bytes ? 1 : 0;
}

}  // namespace

std::function<int()> add_cache_command(CLI::App& app) {
  auto o = std::make_shared<CacheOptions>();
  CLI::App* cmd = app.add_subcommand("cache", "Look after a disk tier directory (--cache-disk-path of `serve`)");
  cmd->require_subcommand(1);
  cmd->add_option("--cache-disk-path", o->dir, "The disk tier's directory")->envname("PREFIXD_CACHE_DISK_PATH");
  CLI::App* ls = cmd->add_subcommand("ls", "List the record files, most recently used first, and their total");
  ls->add_flag("--json", o->json, "Print a JSON array, one object per file");
  CLI::App* inspect = cmd->add_subcommand("inspect", "Print every field of one file's header and check both checksums");
  inspect->add_option("target", o->target, "A key (its hex, or an unambiguous prefix of it) or a file path")->required();
  inspect->add_flag("--tokens", o->all_tokens, "Print every token id (default: the first 32)");
  CLI::App* verify = cmd->add_subcommand(
      "verify", "Read every file fully and check every checksum; exit status 1 when any file is bad");
  verify->add_flag("--remove", o->remove, "Delete the bad files (nothing is deleted without it)");
  verify->footer("With --remove, stop the server that uses the directory first: it would count the removed files "
                 "until it restarts (a read of one is a miss, never an error).");
  CLI::App* gc = cmd->add_subcommand("gc", "Remove files until the directory takes at most --max-bytes");
  gc->footer("The server's policy: least recently used first (by mtime, which every verified read refreshes), never "
             "a segment another file extends; files a server would refuse go first, whatever the limit.\n"
             "Do not run gc on a directory a running server uses: its index would still count the removed files "
             "until it restarts. Stop the server, or lower its --cache-disk-max-bytes and restart it instead.");
  gc->add_option("--max-bytes", o->max_bytes, "Most bytes the record files may take (suffixes: K, M, G, T; powers of 1024)")
      ->transform(CLI::AsSizeValue(false))
      ->required();
  for (CLI::App* sub : {ls, inspect, verify, gc}) sub->fallthrough();  // --cache-disk-path after the verb too
  return [o, ls, inspect, verify, gc]() {
    if (ls->parsed()) return run_ls(*o);
    if (inspect->parsed()) return run_inspect(*o);
    if (verify->parsed()) return run_verify(*o);
    if (gc->parsed()) return run_gc(*o);
    return 1;
  };
}

}  // namespace prefixd::cli
