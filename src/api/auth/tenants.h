// prefixd api — tenants: who a bearer key belongs to.
//
// A key file has one key per line, `KEY TENANT [admin]`; `#` starts a comment, blank lines are
// ignored. The tenant decides the cache namespace of everything its keys send (tenants never share
// K/V) and what the cache views show; an admin key also sees and resets every tenant's cache and
// reads /metrics. `--api-key KEY` is the one-key shortcut: tenant "default", admin.
//
// Keys are never compared with an early exit: a token is digested once and its digest compared
// with every key's digest in full, so neither a key's bytes nor its length can be learned from
// response times.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prefixd::api {

// The tenant every request belongs to when no key file is configured (and `--api-key`'s).
inline constexpr std::string_view kDefaultTenant = "default";

struct Tenant {
  std::string id;
  bool admin = false;
  bool operator==(const Tenant&) const = default;
};

// Tenant ids name folders (per-tenant artifact directories) and appear in metrics labels:
// letters, digits, '.', '_' and '-', 1 to 64 characters, not starting with '.'.
bool valid_tenant_id(std::string_view id);

// True when `a` and `b` hold the same bytes; the time taken depends only on their lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// An immutable set of keys. Copyable; KeyStore swaps whole rings on reload.
class KeyRing {
 public:
  KeyRing() = default;
  // Parses the key file format. The error names the line at fault ("line 3: ..."), and a file
  // with no key at all is an error too (it would lock every client out).
  static std::expected<KeyRing, std::string> parse(std::string_view text);
  // Reads and parses a key file; the error names the file.
  static std::expected<KeyRing, std::string> load(const std::filesystem::path& path);
  // `--api-key KEY`: one admin key of the default tenant.
  static KeyRing single(std::string_view key);

  // The tenant of `token`, compared with every key in constant time; nullopt when none matches.
  std::optional<Tenant> find(std::string_view token) const;
  std::size_t size() const { return keys_.size(); }
  // Every tenant id, sorted, once each.
  std::vector<std::string> tenants() const;

 private:
  using KeyDigest = std::array<std::uint8_t, 32>;
  struct Entry {
    KeyDigest digest;
    Tenant tenant;
  };
  static KeyDigest digest_of(std::string_view key);

  std::vector<Entry> keys_;
};

// The server's current key ring, replaced whole on reload (SIGHUP). Thread-safe: requests read
// the ring while a reload swaps it.
class KeyStore {
 public:
  explicit KeyStore(KeyRing ring, std::filesystem::path source = {});

  std::shared_ptr<const KeyRing> current() const;
  // The file the ring was loaded from; empty for `--api-key`.
  const std::filesystem::path& source() const { return source_; }
  // Reads `source()` again. On success the new ring replaces the old one and the answer says how
  // many keys and tenants it has; on failure the old ring stays and the error says why.
  std::expected<std::string, std::string> reload();

 private:
  std::filesystem::path source_;
  mutable std::mutex mutex_;
  std::shared_ptr<const KeyRing> ring_;
};

}  // namespace prefixd::api
