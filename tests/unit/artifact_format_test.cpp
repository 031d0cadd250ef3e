// The artifact encoding in memory (cache/artifact.h): what encode_artifact writes decodes back to
// the same artifact, and decode_artifact refuses each kind of damage with its kind of error.
#include <gtest/gtest.h>

#include <optional>
#include <span>

#include "cache/artifact.h"
#include "reseal.h"
#include "support/disk_fixtures.h"

namespace prefixd::cache {
namespace {

using testing::test_checkpoint;
using testing::test_digest;
using testing::test_segment;

Artifact two_segments_and_a_checkpoint() {
  const Digest model = test_digest(0x11, 1);
  Artifact a{.model = model, .ns = test_digest(0xee, 0), .created_unix_ms = 1'700'000'000'123};
  for (int t = 0; t < 12; ++t) a.tokens.push_back(t);
  a.records.push_back(test_segment(model, test_digest(0x22, 1), test_digest(0xee, 0), 0, 8, 40));
  a.records.push_back(test_segment(model, test_digest(0x22, 2), test_digest(0x22, 1), 8, 4, 24));
  a.records.push_back(test_checkpoint(model, test_digest(0x33, 1), 12, 16));
  return a;
}

// How decode_artifact refuses `bytes`; nothing when it accepts them.
std::optional<ArtifactError::Kind> kind_of(std::span<const std::uint8_t> bytes, const Digest& model) {
  try {
    decode_artifact(bytes, model, "test");
  } catch (const ArtifactError& e) {
    return e.kind();
  }
  return std::nullopt;
}

TEST(ArtifactFormat, EncodedArtifactsDecodeToTheSameRecordsAndCreationTime) {
  const Artifact a = two_segments_and_a_checkpoint();
  const engine::Bytes bytes = encode_artifact(a);
  const Artifact b = decode_artifact(bytes, a.model, "test");
  EXPECT_EQ(b.created_unix_ms, a.created_unix_ms);
  EXPECT_EQ(b.tokens, a.tokens);
  ASSERT_EQ(b.records.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(b.records[i].meta.key, a.records[i].meta.key);
    EXPECT_EQ(b.records[i].meta.tokens, a.records[i].meta.tokens);
    EXPECT_EQ(b.records[i].payload, a.records[i].payload);
  }
  EXPECT_EQ(encode_artifact(b), bytes) << "decoding loses nothing";
  Artifact now = a;
  now.created_unix_ms = 0;
  EXPECT_GT(decode_artifact(encode_artifact(now), a.model, "test").created_unix_ms, a.created_unix_ms) << "0: now";
}

TEST(ArtifactFormat, EachDamageIsRefusedWithItsKind) {
  const Artifact a = two_segments_and_a_checkpoint();
  const engine::Bytes bytes = encode_artifact(a);
  Digest other = a.model;
  other[5] ^= 1;
  EXPECT_EQ(kind_of(bytes, other), ArtifactError::Kind::model);
  engine::Bytes version = bytes;
  version[8] = 9;
  EXPECT_EQ(kind_of(version, a.model), ArtifactError::Kind::version);
  for (const std::size_t cut : {std::size_t{10}, std::size_t{120}, bytes.size() - 1}) {
    EXPECT_EQ(kind_of(std::span(bytes).first(cut), a.model), ArtifactError::Kind::corrupt) << cut;
  }
  engine::Bytes trailing = bytes;
  trailing.push_back(0);
  EXPECT_EQ(kind_of(trailing, a.model), ArtifactError::Kind::corrupt);
  engine::Bytes flipped = bytes;
  flipped[bytes.size() - 3] ^= 0x40;  // inside the checkpoint's payload
  EXPECT_EQ(kind_of(flipped, a.model), ArtifactError::Kind::corrupt);
}

// The encoder stamps every artifact, so a creation time of 0 is a file no encoder wrote; accepting
// it would break the round trip (encoding reads 0 as "now"). The fuzzer found such a file.
TEST(ArtifactFormat, AHeaderWithoutCreationTimeIsRefusedEvenWithValidChecksums) {
  const Artifact a = two_segments_and_a_checkpoint();
  engine::Bytes bytes = encode_artifact(a);
  constexpr std::size_t kCreatedAt = 16 + 32 * 4 + 8;
  std::fill_n(bytes.begin() + kCreatedAt, 8, 0);
  ASSERT_TRUE(fuzz::reseal_artifact(bytes));
  EXPECT_EQ(kind_of(bytes, a.model), ArtifactError::Kind::corrupt);
}

}  // namespace
}  // namespace prefixd::cache
