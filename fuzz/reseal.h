// prefixd fuzz — makes mutated bytes carry checksums that match their contents again.
//
// A fuzzer cannot guess a 64-bit checksum, so a mutated record or artifact would always stop at
// the first checksum test and never reach the decoding behind it. The targets decode every input
// twice: as it is (what a damaged file looks like) and resealed by these functions (what a file
// written with wrong contents, or crafted, looks like), which recompute each checksum over the
// bytes it covers, exactly where the encoders put it. Both formats are little-endian.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "cache/disk_format.h"

namespace prefixd::fuzz {

inline std::uint64_t load_u64(std::span<const std::uint8_t> bytes, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(bytes[at + i]) << (8 * i);
  return v;
}
inline std::uint32_t load_u32(std::span<const std::uint8_t> bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(bytes[at + i]) << (8 * i);
  return v;
}
inline void store_u64(std::span<std::uint8_t> bytes, std::size_t at, std::uint64_t v) {
  for (std::size_t i = 0; i < 8; ++i) bytes[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// XXH3-64 of `fixed` without its last 8 bytes (where the checksum goes), then of `rest`.
inline std::uint64_t checksum_around(std::span<const std::uint8_t> fixed, std::span<const std::uint8_t> rest) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, fixed.data(), fixed.size() - 8);
  XXH3_64bits_update(&state, rest.data(), rest.size());
  return XXH3_64bits_digest(&state);
}

// A disk record (cache/disk_format.h): the payload checksum (the field before the scope) over the
// bytes after the token ids, then the header checksum (its last field) over the header
// and the token ids. False when the bytes are too short for a header or its token ids.
inline bool reseal_record(std::span<std::uint8_t> bytes) {
  constexpr std::size_t kTokenCountAt = 8 + 4 + 4 + 32 * 4 + 4 + 4;
  constexpr std::size_t kPayloadChecksumAt = cache::kRecordHeaderBytes - 8 - 32 - 8;  // then scope, header checksum
  if (bytes.size() < cache::kRecordHeaderBytes) return false;
  const std::uint64_t header_bytes = cache::kRecordHeaderBytes + std::uint64_t{load_u32(bytes, kTokenCountAt)} * 4;
  if (header_bytes > bytes.size()) return false;
  const auto payload = bytes.subspan(header_bytes);
  store_u64(bytes, kPayloadChecksumAt, cache::payload_checksum(payload));
  store_u64(bytes, cache::kRecordHeaderBytes - 8,
            checksum_around(bytes.first(cache::kRecordHeaderBytes), bytes.subspan(cache::kRecordHeaderBytes, header_bytes - cache::kRecordHeaderBytes)));
  return true;
}

// An artifact (cache/artifact.h): the header checksum (the last fixed field) over the fixed
// header, the token ids and (format version 3 on) the manifest's length and bytes; then every
// length-prefixed record that lies wholly inside the bytes. False when the bytes are too short for
// the header.
inline bool reseal_artifact(std::span<std::uint8_t> bytes) {
  // magic, version, record count, model, ns, scope, salt, token count, fork, created, checksum
  constexpr std::size_t kFixedBytes = 8 + 4 + 4 + 32 * 4 + 4 + 4 + 8 + 8;
  constexpr std::size_t kVersionAt = 8;
  constexpr std::size_t kRecordCountAt = 12;
  constexpr std::size_t kTokenCountAt = 16 + 32 * 4;
  if (bytes.size() < kFixedBytes) return false;
  std::uint64_t header_bytes = kFixedBytes + std::uint64_t{load_u32(bytes, kTokenCountAt)} * 4;
  if (header_bytes > bytes.size()) return false;
  if (load_u32(bytes, kVersionAt) >= 3) {
    if (bytes.size() - header_bytes < 4) return false;
    header_bytes += 4 + std::uint64_t{load_u32(bytes, static_cast<std::size_t>(header_bytes))};
    if (header_bytes > bytes.size()) return false;
  }
  store_u64(bytes, kFixedBytes - 8, checksum_around(bytes.first(kFixedBytes), bytes.subspan(kFixedBytes, header_bytes - kFixedBytes)));
  std::size_t at = header_bytes;
  for (std::uint32_t r = 0, n = load_u32(bytes, kRecordCountAt); r < n && bytes.size() - at >= 8; ++r) {
    const std::uint64_t length = load_u64(bytes, at);
    at += 8;
    if (length > bytes.size() - at) break;
    reseal_record(bytes.subspan(at, length));
    at += length;
  }
  return true;
}

}  // namespace prefixd::fuzz
