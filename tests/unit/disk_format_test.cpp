// The disk tier's record format: what is written decodes to what was meant, and every way the
// bytes can go wrong — a flipped byte anywhere, a short file, another format version, another
// model — is named, never decoded into a record.
#include <gtest/gtest.h>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include "cache/disk_format.h"
#include "support/disk_fixtures.h"

namespace prefixd::cache {
namespace {

using testing::encode_record;
using testing::test_checkpoint;
using testing::test_digest;
using testing::test_segment;

const Digest kModel = test_digest(0x11, 1);

// Offsets of the fixed header's fields (see kRecordHeaderBytes).
constexpr std::size_t kVersionAt = 8;
constexpr std::size_t kTokenCountAt = 8 + 4 + 4 + 32 * 4 + 4 + 4;
constexpr std::size_t kHeaderChecksumAt = kRecordHeaderBytes - 8;

std::size_t header_bytes_of(const Record& r) { return kRecordHeaderBytes + r.meta.tokens.size() * 4; }

// Writes a correct header checksum over whatever the header and token ids now hold, so a test can
// change one field and nothing else.
void rechecksum(engine::Bytes& bytes, std::size_t header_bytes) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, bytes.data(), kHeaderChecksumAt);
  XXH3_64bits_update(&state, bytes.data() + kRecordHeaderBytes, header_bytes - kRecordHeaderBytes);
  std::uint64_t check = XXH3_64bits_digest(&state);
  for (std::size_t i = 0; i < 8; ++i) bytes[kHeaderChecksumAt + i] = static_cast<std::uint8_t>(check >> (8 * i));
}

void expect_same_meta(const RecordMeta& got, const RecordMeta& want, std::uint64_t payload_bytes) {
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.model, want.model);
  EXPECT_EQ(got.ns, want.ns);
  EXPECT_EQ(got.key, want.key);
  EXPECT_EQ(got.parent, want.parent);
  EXPECT_EQ(got.begin, want.begin);
  EXPECT_EQ(got.window_from, want.window_from);
  EXPECT_EQ(got.created_unix_ms, want.created_unix_ms);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.payload_bytes, payload_bytes);
}

TEST(DiskFormat, SegmentRoundTripsWithItsTokens) {
  Record r = test_segment(kModel, test_digest(1, 1), test_digest(1, 0), 64, 17, 333);
  r.meta.created_unix_ms = 1'700'000'000'123;
  const engine::Bytes bytes = encode_record(r);
  ASSERT_EQ(bytes.size(), header_bytes_of(r) + r.payload.size());
  ASSERT_EQ(header_size(bytes), header_bytes_of(r));
  const DecodedRecord decoded = decode_record(bytes, &kModel);
  ASSERT_EQ(decoded.fault, RecordFault::none);
  expect_same_meta(decoded.record.meta, r.meta, r.payload.size());
  EXPECT_EQ(decoded.record.meta.payload_checksum, payload_checksum(r.payload));
  EXPECT_EQ(decoded.record.payload, r.payload);
}

TEST(DiskFormat, CheckpointRoundTripsWithoutTokens) {
  Record r = test_checkpoint(kModel, test_digest(2, 1), 96, 200);
  r.meta.created_unix_ms = 42;
  const DecodedRecord decoded = decode_record(encode_record(r), nullptr);
  ASSERT_EQ(decoded.fault, RecordFault::none);
  EXPECT_TRUE(decoded.record.meta.tokens.empty());
  EXPECT_EQ(decoded.record.meta.window_from, 48);
  expect_same_meta(decoded.record.meta, r.meta, r.payload.size());
  EXPECT_EQ(decoded.record.payload, r.payload);
}

TEST(DiskFormat, EveryFlippedHeaderByteIsDetected) {
  const Record r = test_segment(kModel, test_digest(3, 1), test_digest(3, 0), 0, 9, 64);
  const engine::Bytes good = encode_record(r);
  const std::size_t header = header_bytes_of(r);
  for (std::uint8_t mask : {0x01, 0x80, 0xff}) {
    for (std::size_t i = 0; i < header; ++i) {
      engine::Bytes bytes = good;
      bytes[i] ^= mask;
      const RecordFault fault = decode_record(bytes, &kModel).fault;
      SCOPED_TRACE("byte " + std::to_string(i) + " mask " + std::to_string(mask));
      if (i < kVersionAt) {
        EXPECT_EQ(fault, RecordFault::bad_magic);
      } else if (i < kVersionAt + 4) {
        EXPECT_EQ(fault, RecordFault::version);
      } else if (i >= kTokenCountAt && i < kTokenCountAt + 4) {
        // A larger count claims token ids past the end of the file: as good as a short file.
        EXPECT_TRUE(fault == RecordFault::checksum || fault == RecordFault::truncated) << record_fault_name(fault);
      } else {
        EXPECT_EQ(fault, RecordFault::checksum);
      }
      EXPECT_NE(decode_header(std::span(bytes).first(std::min(bytes.size(), header)), &kModel).fault, RecordFault::none);
    }
  }
}

TEST(DiskFormat, FlippedPayloadByteFailsTheChecksum) {
  const Record r = test_segment(kModel, test_digest(4, 1), test_digest(4, 0), 0, 5, 128);
  const engine::Bytes good = encode_record(r);
  const std::size_t header = header_bytes_of(r);
  for (std::size_t i : {header, header + 1, header + 64, good.size() - 1}) {
    engine::Bytes bytes = good;
    bytes[i] ^= 0x20;
    EXPECT_EQ(decode_header(bytes, &kModel, bytes.size()).fault, RecordFault::none) << "the header does not cover it";
    EXPECT_EQ(decode_record(bytes, &kModel).fault, RecordFault::checksum) << "byte " << i;
  }
}

TEST(DiskFormat, ShortBytesAreTruncated) {
  const Record r = test_segment(kModel, test_digest(5, 1), test_digest(5, 0), 0, 6, 100);
  const engine::Bytes good = encode_record(r);
  const std::size_t header = header_bytes_of(r);
  for (std::size_t length : {std::size_t{0}, std::size_t{4}, std::size_t{8}, kRecordHeaderBytes - 1, kRecordHeaderBytes,
                             header - 1, header, header + 50, good.size() - 1}) {
    const auto bytes = std::span(good).first(length);
    EXPECT_EQ(decode_record(bytes, &kModel).fault, RecordFault::truncated) << "length " << length;
  }
  EXPECT_EQ(decode_record(good, &kModel).fault, RecordFault::none);
}

TEST(DiskFormat, AnotherVersionIsNamedAsSuch) {
  const Record r = test_segment(kModel, test_digest(6, 1), test_digest(6, 0), 0, 3, 32);
  engine::Bytes bytes = encode_record(r);
  rechecksum(bytes, header_bytes_of(r));
  ASSERT_EQ(decode_record(bytes, &kModel).fault, RecordFault::none) << "rechecksum alone changes nothing";
  bytes[kVersionAt] = static_cast<std::uint8_t>(kDiskFormatVersion + 1);
  rechecksum(bytes, header_bytes_of(r));
  EXPECT_EQ(decode_header(bytes, &kModel, bytes.size()).fault, RecordFault::version);
  EXPECT_EQ(decode_record(bytes, nullptr).fault, RecordFault::version);
}

TEST(DiskFormat, AnotherModelsRecordIsForeign) {
  const Record r = test_segment(kModel, test_digest(7, 1), test_digest(7, 0), 0, 3, 32);
  const engine::Bytes bytes = encode_record(r);
  const Digest other = test_digest(0x11, 2);
  EXPECT_EQ(decode_record(bytes, &other).fault, RecordFault::foreign);
  EXPECT_EQ(decode_header(bytes, &other, bytes.size()).fault, RecordFault::foreign);
  EXPECT_EQ(decode_record(bytes, &kModel).fault, RecordFault::none);
  EXPECT_EQ(decode_record(bytes, nullptr).fault, RecordFault::none) << "no expected model: every model's records";
}

}  // namespace
}  // namespace prefixd::cache
