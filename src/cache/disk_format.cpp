#include "cache/disk_format.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <blake3.h>
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

namespace prefixd::cache {
namespace {

constexpr std::array<std::uint8_t, 8> kMagic = {'P', 'F', 'X', 'D', 'K', 'V', 0x0d, 0x0a};
// The header checksum is the last field; everything before it (and the token ids) is covered.
constexpr std::size_t kHeaderChecksumAt = kRecordHeaderBytes - 8;
// Sanity bound on a header's token count, so a corrupt count cannot ask for gigabytes.
constexpr std::uint32_t kMaxTokens = 1u << 24;

class Writer {
 public:
  explicit Writer(engine::Bytes& out) : out_(out) {}
  void bytes(std::span<const std::uint8_t> data) { out_.insert(out_.end(), data.begin(), data.end()); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void i32(std::int32_t v) { u32(static_cast<std::uint32_t>(v)); }

 private:
  engine::Bytes& out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> data) : data_(data) {}
  void bytes(std::span<std::uint8_t> out) {
    std::memcpy(out.data(), data_.data() + at_, out.size());
    at_ += out.size();
  }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(data_[at_ + static_cast<size_t>(i)]) << (8 * i);
    at_ += 4;
    return v;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(data_[at_ + static_cast<size_t>(i)]) << (8 * i);
    at_ += 8;
    return v;
  }
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }

 private:
  std::span<const std::uint8_t> data_;
  std::size_t at_ = 0;
};

std::uint64_t header_checksum(std::span<const std::uint8_t> fixed_without_checksum, std::span<const std::uint8_t> tokens) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, fixed_without_checksum.data(), fixed_without_checksum.size());
  XXH3_64bits_update(&state, tokens.data(), tokens.size());
  return XXH3_64bits_digest(&state);
}

std::uint32_t token_count_of(std::span<const std::uint8_t> fixed) {
  Reader r(fixed.subspan(8 + 4 + 4 + 32 * 4 + 4 + 4));
  return r.u32();
}

}  // namespace

const char* record_kind_name(RecordKind kind) { return kind == RecordKind::segment ? "segment" : "checkpoint"; }

const char* record_fault_name(RecordFault fault) {
  switch (fault) {
    case RecordFault::none: return "none";
    case RecordFault::truncated: return "truncated";
    case RecordFault::bad_magic: return "bad_magic";
    case RecordFault::version: return "version";
    case RecordFault::checksum: return "checksum";
    case RecordFault::foreign: return "foreign";
  }
  return "unknown";
}

std::uint64_t payload_checksum(std::span<const std::uint8_t> payload) {
  return XXH3_64bits(payload.data(), payload.size());
}

engine::Bytes encode_header(const RecordMeta& meta, std::span<const std::uint8_t> payload) {
  engine::Bytes out;
  out.reserve(kRecordHeaderBytes + meta.tokens.size() * 4);
  Writer w(out);
  w.bytes(kMagic);
  w.u32(kDiskFormatVersion);
  w.u32(static_cast<std::uint32_t>(meta.kind));
  w.bytes(meta.model);
  w.bytes(meta.ns);
  w.bytes(meta.key);
  w.bytes(meta.parent);
  w.i32(meta.begin);
  w.i32(meta.window_from);
  w.u32(static_cast<std::uint32_t>(meta.tokens.size()));
  w.u32(0);  // reserved
  w.u64(meta.created_unix_ms);
  w.u64(payload.size());
  w.u64(payload_checksum(payload));
  w.bytes(meta.scope);
  const std::size_t fixed = out.size();
  for (engine::Token t : meta.tokens) w.i32(t);
  const auto all = std::span<const std::uint8_t>(out);
  const std::uint64_t check = header_checksum(all.first(fixed), all.subspan(fixed));
  engine::Bytes checksum;
  Writer(checksum).u64(check);
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(fixed), checksum.begin(), checksum.end());
  return out;
}

std::optional<std::size_t> header_size(std::span<const std::uint8_t> fixed) {
  if (fixed.size() < kRecordHeaderBytes || !std::equal(kMagic.begin(), kMagic.end(), fixed.begin())) return std::nullopt;
  const std::uint32_t tokens = token_count_of(fixed);
  if (tokens > kMaxTokens) return std::nullopt;
  return kRecordHeaderBytes + static_cast<std::size_t>(tokens) * 4;
}

DecodedHeader decode_header(std::span<const std::uint8_t> bytes, const Digest* expected_model,
                            std::optional<std::uint64_t> file_bytes) {
  DecodedHeader out;
  if (bytes.size() < kRecordHeaderBytes) {
    out.fault = bytes.size() >= kMagic.size() && !std::equal(kMagic.begin(), kMagic.end(), bytes.begin())
                    ? RecordFault::bad_magic
                    : RecordFault::truncated;
    return out;
  }
  if (!std::equal(kMagic.begin(), kMagic.end(), bytes.begin())) {
    out.fault = RecordFault::bad_magic;
    return out;
  }
  Reader r(bytes.subspan(kMagic.size()));
  const std::uint32_t version = r.u32();
  if (version != kDiskFormatVersion) {
    out.fault = RecordFault::version;
    return out;
  }
  const std::uint32_t token_count = token_count_of(bytes);
  if (token_count > kMaxTokens) {
    out.fault = RecordFault::checksum;
    return out;
  }
  out.size = kRecordHeaderBytes + static_cast<std::size_t>(token_count) * 4;
  if (bytes.size() < out.size) {
    out.fault = RecordFault::truncated;
    return out;
  }
  RecordMeta& m = out.meta;
  const std::uint32_t kind = r.u32();
  r.bytes(m.model);
  r.bytes(m.ns);
  r.bytes(m.key);
  r.bytes(m.parent);
  m.begin = r.i32();
  m.window_from = r.i32();
  r.u32();  // token count, read above
  r.u32();  // reserved
  m.created_unix_ms = r.u64();
  m.payload_bytes = r.u64();
  m.payload_checksum = r.u64();
  r.bytes(m.scope);
  const std::uint64_t stored_check = r.u64();
  out.header_checksum = stored_check;
  const std::uint64_t check =
      header_checksum(bytes.first(kHeaderChecksumAt), bytes.subspan(kRecordHeaderBytes, out.size - kRecordHeaderBytes));
  if (check != stored_check || (kind != 1 && kind != 2) || m.begin < 0) {
    out.fault = RecordFault::checksum;
    return out;
  }
  m.kind = static_cast<RecordKind>(kind);
  m.tokens.resize(token_count);
  Reader tokens(bytes.subspan(kRecordHeaderBytes));
  for (auto& t : m.tokens) t = tokens.i32();
  if (file_bytes && *file_bytes != out.size + m.payload_bytes) {
    out.fault = *file_bytes < out.size + m.payload_bytes ? RecordFault::truncated : RecordFault::checksum;
    return out;
  }
  if (expected_model != nullptr && m.model != *expected_model) out.fault = RecordFault::foreign;
  return out;
}

DecodedRecord decode_record(std::span<const std::uint8_t> bytes, const Digest* expected_model) {
  DecodedRecord out;
  DecodedHeader header = decode_header(bytes, expected_model, bytes.size());
  out.fault = header.fault;
  if (header.fault != RecordFault::none) return out;
  const auto payload = bytes.subspan(header.size);
  if (payload_checksum(payload) != header.meta.payload_checksum) {
    out.fault = RecordFault::checksum;
    return out;
  }
  out.record.meta = std::move(header.meta);
  out.record.payload.assign(payload.begin(), payload.end());
  return out;
}

Digest model_key(std::string_view fingerprint, std::string_view runtime_signature) {
  blake3_hasher hasher;
  blake3_hasher_init(&hasher);
  static constexpr std::string_view kDomain = "prefixd.model-key.v1";
  for (std::string_view field : {kDomain, fingerprint, runtime_signature}) {
    const std::uint64_t n = field.size();
    std::array<std::uint8_t, 8> length{};
    for (size_t i = 0; i < 8; ++i) length[i] = static_cast<std::uint8_t>(n >> (8 * i));
    blake3_hasher_update(&hasher, length.data(), length.size());
    blake3_hasher_update(&hasher, field.data(), field.size());
  }
  Digest out{};
  blake3_hasher_finalize(&hasher, out.data(), out.size());
  return out;
}

Digest checkpoint_record_key(const Digest& checkpoint_key) {
  static constexpr std::string_view kDomain = "prefixd.checkpoint-record.v1";
  blake3_hasher hasher;
  blake3_hasher_init(&hasher);
  blake3_hasher_update(&hasher, kDomain.data(), kDomain.size());
  blake3_hasher_update(&hasher, checkpoint_key.data(), checkpoint_key.size());
  Digest out{};
  blake3_hasher_finalize(&hasher, out.data(), out.size());
  return out;
}

Digest digest_from(std::string_view raw32) {
  Digest out{};
  std::memcpy(out.data(), raw32.data(), std::min(raw32.size(), out.size()));
  return out;
}

std::string digest_string(const Digest& digest) { return {reinterpret_cast<const char*>(digest.data()), digest.size()}; }

}  // namespace prefixd::cache
