#include "api/auth/tenants.h"

#include <algorithm>
#include <format>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <blake3.h>

namespace prefixd::api {
namespace {

// The fields of one line, split on spaces and tabs.
std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
    const std::size_t start = at;
    while (at < line.size() && line[at] != ' ' && line[at] != '\t') ++at;
    if (at > start) out.push_back(line.substr(start, at - start));
  }
  return out;
}

// A key travels in an HTTP header: visible ASCII only.
bool valid_key(std::string_view key) {
  return !key.empty() && std::ranges::all_of(key, [](char c) { return c > ' ' && c < 0x7f; });
}

}  // namespace

bool valid_tenant_id(std::string_view id) {
  if (id.empty() || id.size() > 64 || id.front() == '.') return false;
  return std::ranges::all_of(id, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

KeyRing::KeyDigest KeyRing::digest_of(std::string_view key) {
  blake3_hasher hasher;
  blake3_hasher_init(&hasher);
  static constexpr std::string_view kDomain = "prefixd.api-key.v1";
  blake3_hasher_update(&hasher, kDomain.data(), kDomain.size());
  blake3_hasher_update(&hasher, key.data(), key.size());
  KeyDigest out{};
  blake3_hasher_finalize(&hasher, out.data(), out.size());
  return out;
}

std::expected<KeyRing, std::string> KeyRing::parse(std::string_view text) {
  KeyRing ring;
  std::map<KeyDigest, int> first_line;  // a key given twice would make its tenant ambiguous
  int number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::vector<std::string_view> fields = fields_of(line);
    if (fields.empty()) continue;
    const auto fail = [&](std::string_view why) {
      return std::unexpected(std::format("line {}: {}", number, why));
    };
    if (fields.size() < 2) return fail("expected 'KEY TENANT [admin]'");
    if (fields.size() > 3) return fail(std::format("unexpected '{}' after the tenant and 'admin'", fields[3]));
    if (!valid_key(fields[0])) return fail("the key must be visible ASCII characters");
    if (!valid_tenant_id(fields[1])) {
      return fail(std::format("tenant '{}' is not a valid id (letters, digits, '.', '_', '-', 1 to 64 characters, "
                              "not starting with '.')",
                              fields[1]));
    }
    if (fields.size() == 3 && fields[2] != "admin") {
      return fail(std::format("the third field must be 'admin', not '{}'", fields[2]));
    }
    const KeyDigest digest = digest_of(fields[0]);
    if (const auto [it, fresh] = first_line.emplace(digest, number); !fresh) {
      return fail(std::format("the same key is already given on line {}", it->second));
    }
    ring.keys_.push_back(Entry{digest, Tenant{std::string(fields[1]), fields.size() == 3}});
  }
  if (ring.keys_.empty()) return std::unexpected("no key in the file: every request would be refused");
  return ring;
}

std::expected<KeyRing, std::string> KeyRing::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::unexpected(std::format("cannot read the key file {}", path.string()));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto ring = parse(text);
  if (!ring) return std::unexpected(std::format("key file {}: {}", path.string(), ring.error()));
  return ring;
}

KeyRing KeyRing::single(std::string_view key) {
  KeyRing ring;
  ring.keys_.push_back(Entry{digest_of(key), Tenant{std::string(kDefaultTenant), true}});
  return ring;
}

std::optional<Tenant> KeyRing::find(std::string_view token) const {
  const KeyDigest given = digest_of(token);
  const Entry* found = nullptr;
  for (const Entry& entry : keys_) {
    // Every key is compared in full; which one matched changes only which pointer is kept.
    const bool same = constant_time_equal(
        std::string_view(reinterpret_cast<const char*>(given.data()), given.size()),
        std::string_view(reinterpret_cast<const char*>(entry.digest.data()), entry.digest.size()));
    if (same) found = &entry;
  }
  if (found == nullptr) return std::nullopt;
  return found->tenant;
}

std::vector<std::string> KeyRing::tenants() const {
  std::set<std::string> ids;
  for (const Entry& entry : keys_) ids.insert(entry.tenant.id);
  return {ids.begin(), ids.end()};
}

KeyStore::KeyStore(KeyRing ring, std::filesystem::path source)
    : source_(std::move(source)), ring_(std::make_shared<const KeyRing>(std::move(ring))) {}

std::shared_ptr<const KeyRing> KeyStore::current() const {
  std::lock_guard lock(mutex_);
  return ring_;
}

std::expected<std::string, std::string> KeyStore::reload() {
  if (source_.empty()) return std::unexpected("the keys were given with --api-key, not read from a file");
  auto ring = KeyRing::load(source_);
  if (!ring) return std::unexpected(ring.error());
  const std::string summary = std::format("{} keys of {} tenants", ring->size(), ring->tenants().size());
  auto fresh = std::make_shared<const KeyRing>(std::move(*ring));
  std::lock_guard lock(mutex_);
  ring_ = std::move(fresh);
  return summary;
}

}  // namespace prefixd::api
