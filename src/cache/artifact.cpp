#include "cache/artifact.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <iterator>

#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "cache/file_io.h"

namespace prefixd::cache {
namespace fs = std::filesystem;
namespace {

constexpr std::array<std::uint8_t, 8> kMagic = {'P', 'F', 'X', 'D', 'A', 'R', 'T', '\n'};
// magic, version, record count, model, ns, scope, salt, token count, fork, created, checksum
constexpr std::size_t kFixedBytes = 8 + 4 + 4 + 32 * 4 + 4 + 4 + 8 + 8;
constexpr std::size_t kTokenCountAt = 16 + 32 * 4;
constexpr std::uint32_t kMaxTokens = 1u << 24;
constexpr std::uint32_t kMaxRecords = 1u << 20;

void put_u32(engine::Bytes& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_u64(engine::Bytes& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
std::uint32_t get_u32(std::span<const std::uint8_t> in, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(in[at + i]) << (8 * i);
  return v;
}
std::uint64_t get_u64(std::span<const std::uint8_t> in, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(in[at + i]) << (8 * i);
  return v;
}

std::uint64_t header_checksum(std::span<const std::uint8_t> header) {
  // Everything but the checksum field itself (the 8 bytes before the token ids): the fixed fields,
  // the token ids and the manifest's length and bytes.
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, header.data(), kFixedBytes - 8);
  XXH3_64bits_update(&state, header.data() + kFixedBytes, header.size() - kFixedBytes);
  return XXH3_64bits_digest(&state);
}

[[noreturn]] void corrupt(const std::string& name, const std::string& what) {
  throw ArtifactError(ArtifactError::Kind::corrupt, "artifact " + name + " is corrupt: " + what);
}

std::uint64_t now_unix_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace

engine::Bytes encode_artifact(const Artifact& artifact) {
  if (artifact.manifest.size() > kMaxArtifactManifestBytes) {
    throw std::invalid_argument("an artifact manifest of " + std::to_string(artifact.manifest.size()) +
                                " bytes is longer than the " + std::to_string(kMaxArtifactManifestBytes) + " allowed");
  }
  engine::Bytes out(kMagic.begin(), kMagic.end());
  put_u32(out, kArtifactFormatVersion);
  put_u32(out, static_cast<std::uint32_t>(artifact.records.size()));
  out.insert(out.end(), artifact.model.begin(), artifact.model.end());
  out.insert(out.end(), artifact.ns.begin(), artifact.ns.end());
  out.insert(out.end(), artifact.scope.begin(), artifact.scope.end());
  out.insert(out.end(), artifact.salt.begin(), artifact.salt.end());
  put_u32(out, static_cast<std::uint32_t>(artifact.tokens.size()));
  put_u32(out, static_cast<std::uint32_t>(artifact.fork));
  put_u64(out, artifact.created_unix_ms != 0 ? artifact.created_unix_ms : now_unix_ms());
  put_u64(out, 0);  // the checksum, filled in below
  for (engine::Token t : artifact.tokens) put_u32(out, static_cast<std::uint32_t>(t));
  put_u32(out, static_cast<std::uint32_t>(artifact.manifest.size()));
  out.insert(out.end(), artifact.manifest.begin(), artifact.manifest.end());
  const std::uint64_t check = header_checksum(out);
  for (std::size_t i = 0; i < 8; ++i) out[kFixedBytes - 8 + i] = static_cast<std::uint8_t>(check >> (8 * i));

  // Each record: its length, then its encoding.
  for (const Record& record : artifact.records) {
    const engine::Bytes record_header = encode_header(record.meta, record.payload);
    put_u64(out, record_header.size() + record.payload.size());
    out.insert(out.end(), record_header.begin(), record_header.end());
    out.insert(out.end(), record.payload.begin(), record.payload.end());
  }
  return out;
}

namespace {

// Decodes and verifies the header (fixed fields, token ids, manifest) of a file of a version read;
// returns where the records start. `all` may end after the header. The model key is not checked.
std::size_t decode_header(std::span<const std::uint8_t> all, const std::string& name, Artifact& out,
                          std::uint32_t& record_count) {
  if (all.size() < kFixedBytes || !std::equal(kMagic.begin(), kMagic.end(), all.begin())) {
    corrupt(name, "not a prefixd artifact");
  }
  const std::uint32_t version = get_u32(all, 8);
  if (version < kOldestArtifactFormatVersion || version > kArtifactFormatVersion) {
    throw ArtifactError(ArtifactError::Kind::version,
                        "artifact " + name + " has format version " + std::to_string(version) +
                            "; this build reads versions " + std::to_string(kOldestArtifactFormatVersion) + " to " +
                            std::to_string(kArtifactFormatVersion));
  }
  record_count = get_u32(all, 12);
  std::memcpy(out.model.data(), all.data() + 16, 32);
  std::memcpy(out.ns.data(), all.data() + 48, 32);
  std::memcpy(out.scope.data(), all.data() + 80, 32);
  std::memcpy(out.salt.data(), all.data() + 112, 32);
  const std::uint32_t token_count = get_u32(all, kTokenCountAt);
  out.fork = static_cast<std::int32_t>(get_u32(all, kTokenCountAt + 4));
  out.created_unix_ms = get_u64(all, kTokenCountAt + 8);
  if (token_count > kMaxTokens || record_count > kMaxRecords) corrupt(name, "impossible counts");
  // The encoder stamps every artifact it writes, so 0 marks a file no encoder wrote (and would not
  // survive a round trip, since encoding reads 0 as "now").
  if (out.created_unix_ms == 0) corrupt(name, "no creation time");
  const std::size_t tokens_end = kFixedBytes + static_cast<std::size_t>(token_count) * 4;
  if (all.size() < tokens_end) corrupt(name, "truncated header");
  if (all.size() - tokens_end < 4) corrupt(name, "truncated header");
  const std::uint32_t manifest_bytes = get_u32(all, tokens_end);
  if (manifest_bytes > kMaxArtifactManifestBytes) corrupt(name, "impossible manifest length");
  if (all.size() - tokens_end - 4 < manifest_bytes) corrupt(name, "truncated header");
  const std::size_t header_bytes = tokens_end + 4 + manifest_bytes;
  if (header_checksum(all.first(header_bytes)) != get_u64(all, kFixedBytes - 8)) corrupt(name, "header checksum");
  out.tokens.resize(token_count);
  for (std::size_t i = 0; i < token_count; ++i) out.tokens[i] = static_cast<engine::Token>(get_u32(all, kFixedBytes + 4 * i));
  out.manifest.assign(reinterpret_cast<const char*>(all.data()) + tokens_end + 4, header_bytes - tokens_end - 4);
  return header_bytes;
}

}  // namespace

Artifact decode_artifact(std::span<const std::uint8_t> all, const Digest& model, const std::string& name) {
  Artifact out;
  std::uint32_t record_count = 0;
  const std::size_t header_bytes = decode_header(all, name, out, record_count);
  if (out.model != model) {
    throw ArtifactError(ArtifactError::Kind::model,
                        "artifact " + name + " was made for another model or other settings "
                        "(model key " + to_hex(out.model).substr(0, 16) + ", this server " + to_hex(model).substr(0, 16) + ")");
  }
  const auto token_count = static_cast<std::uint32_t>(out.tokens.size());
  std::size_t at = header_bytes;
  engine::Pos next = 0;
  for (std::uint32_t r = 0; r < record_count; ++r) {
    if (all.size() - at < 8) corrupt(name, "truncated");
    const std::uint64_t length = get_u64(all, at);
    at += 8;
    if (length > all.size() - at) corrupt(name, "truncated");
    DecodedRecord decoded = decode_record(all.subspan(at, length), &model);
    if (decoded.fault != RecordFault::none) corrupt(name, std::string("record ") + std::to_string(r) + ": " + record_fault_name(decoded.fault));
    at += length;
    const RecordMeta& meta = decoded.record.meta;
    // Segments tile the prefix from 0 in order, holding its tokens; a checkpoint ends it.
    if (meta.ns != out.ns) corrupt(name, "a record of another namespace");
    if (meta.scope != out.scope) corrupt(name, "a record of another scope");
    if (meta.kind == RecordKind::segment) {
      const auto n = static_cast<engine::Pos>(meta.tokens.size());
      if (meta.begin != next || next + n > static_cast<engine::Pos>(token_count) ||
          !std::equal(meta.tokens.begin(), meta.tokens.end(), out.tokens.begin() + next)) {
        corrupt(name, "segments do not tile the prefix");
      }
      next += n;
    } else if (r + 1 != record_count || meta.begin != static_cast<engine::Pos>(token_count)) {
      corrupt(name, "a checkpoint that does not end the prefix");
    }
    out.records.push_back(std::move(decoded.record));
  }
  if (at != all.size()) corrupt(name, "trailing bytes");
  if (next != 0 && next != static_cast<engine::Pos>(token_count)) corrupt(name, "segments do not cover the prefix");
  return out;
}

ArtifactInfo write_artifact(const fs::path& path, const Artifact& artifact) {
  const engine::Bytes bytes = encode_artifact(artifact);
  const fs::path temp = path.parent_path() / ("." + path.filename().string() + "." + std::to_string(::getpid()) + ".tmp");
  if (const auto failure = write_atomically(temp, path, {bytes})) {
    throw ArtifactError(ArtifactError::Kind::io, std::string("cannot write artifact ") + path.filename().string() +
                                                     " (" + failure->step + "): " + std::strerror(failure->error));
  }
  ArtifactInfo info{static_cast<std::int32_t>(artifact.tokens.size())};
  for (const Record& record : artifact.records) (record.meta.kind == RecordKind::segment ? info.segments : info.checkpoints) += 1;
  info.bytes = bytes.size();
  return info;
}

Artifact read_artifact(const fs::path& path, const Digest& model) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw ArtifactError(ArtifactError::Kind::not_found, "no artifact named " + path.filename().string());
  }
  std::ifstream in(path, std::ios::binary);
  const engine::Bytes bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!in.good() && !in.eof()) throw ArtifactError(ArtifactError::Kind::io, "cannot read artifact " + path.filename().string());
  return decode_artifact(bytes, model, path.filename().string());
}

Artifact read_artifact_header(const fs::path& path) {
  const std::string name = path.filename().string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw ArtifactError(ArtifactError::Kind::not_found, "no artifact named " + name);
  std::ifstream in(path, std::ios::binary);
  // The fixed fields name the token count; the token ids, the manifest's length and at most the
  // longest manifest follow.
  engine::Bytes bytes(kFixedBytes);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  if (bytes.size() == kFixedBytes) {
    const std::size_t rest = std::size_t{std::min(get_u32(bytes, kTokenCountAt), kMaxTokens)} * 4 + 4 + kMaxArtifactManifestBytes;
    bytes.resize(kFixedBytes + rest);
    in.read(reinterpret_cast<char*>(bytes.data()) + kFixedBytes, static_cast<std::streamsize>(rest));
    bytes.resize(kFixedBytes + static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw ArtifactError(ArtifactError::Kind::io, "cannot read artifact " + name);
  Artifact out;
  std::uint32_t record_count = 0;
  decode_header(bytes, name, out, record_count);
  return out;
}

}  // namespace prefixd::cache
