// The artifact encoding in memory (cache/artifact.h): what encode_artifact writes decodes back to
// the same artifact, and decode_artifact refuses each kind of damage with its kind of error.
#include <gtest/gtest.h>

#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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

// A version 2 file, as the encoder before manifests wrote it: model key 0x40.., namespace 0x80..,
// tokens 7-10, one segment of them with payload bytes 1-8.
constexpr std::string_view kVersion2Hex =
    "504658444152540a0200000001000000404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
    "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f00000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "04000000ffffff7f7b68e5cf8b0100008571786e98e336330700000008000000090000000a000000f800000000000000"
    "504658444b560d0a0200000001000000404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
    "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9fc0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
    "d0d1d2d3d4d5d6d7d8d9dadbdcdddedf808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
    "000000000000000004000000000000006468e5cf8b010000080000000000000097222316ea17f2160000000000000000"
    "000000000000000000000000000000000000000000000000f42bc74e35562cb60700000008000000090000000a000000"
    "0102030405060708";

engine::Bytes from_hex(std::string_view hex) {
  engine::Bytes out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

// Version 2 and 3 files name namespaces that covered the chat template: no request has them any
// more, so they are refused by version, never stored where nothing would reach them.
TEST(ArtifactFormat, AFileOfAnEarlierNamespaceIsRefusedByVersion) {
  const engine::Bytes bytes = from_hex(kVersion2Hex);
  Digest model{};
  for (std::size_t i = 0; i < model.size(); ++i) model[i] = static_cast<std::uint8_t>(0x40 + i);
  EXPECT_EQ(kind_of(bytes, model), ArtifactError::Kind::version);
  try {
    decode_artifact(bytes, model, "v2");
    ADD_FAILURE() << "a version 2 artifact was accepted";
  } catch (const ArtifactError& e) {
    EXPECT_NE(std::string(e.what()).find("format version 2"), std::string::npos) << e.what();
  }
  std::vector<std::uint8_t> resealed = bytes;
  ASSERT_TRUE(fuzz::reseal_artifact(resealed));
  EXPECT_EQ(resealed, bytes) << "the resealer knows version 2 headers";
}

TEST(ArtifactFormat, TheManifestRoundTripsUnderTheHeaderChecksum) {
  Artifact a = two_segments_and_a_checkpoint();
  a.manifest = R"({"id":"m","start":12,"chain":["x"]})";
  const engine::Bytes bytes = encode_artifact(a);
  EXPECT_EQ(decode_artifact(bytes, a.model, "test").manifest, a.manifest);
  EXPECT_EQ(bytes[8], kArtifactFormatVersion);
  // The manifest follows the token ids and its length.
  const std::size_t manifest_at = 168 + 4 * a.tokens.size() + 4;
  ASSERT_EQ(std::string(bytes.begin() + static_cast<std::ptrdiff_t>(manifest_at),
                        bytes.begin() + static_cast<std::ptrdiff_t>(manifest_at + a.manifest.size())),
            a.manifest);
  engine::Bytes changed = bytes;
  changed[manifest_at + 2] ^= 1;
  EXPECT_EQ(kind_of(changed, a.model), ArtifactError::Kind::corrupt) << "the checksum covers the manifest";
  engine::Bytes longer = bytes;
  longer[manifest_at - 4] = 0xff;
  longer[manifest_at - 3] = 0xff;
  EXPECT_EQ(kind_of(longer, a.model), ArtifactError::Kind::corrupt) << "an impossible manifest length";

  a.manifest.assign(kMaxArtifactManifestBytes + 1, 'x');
  EXPECT_THROW(encode_artifact(a), std::invalid_argument);
  a.manifest.pop_back();
  EXPECT_EQ(decode_artifact(encode_artifact(a), a.model, "test").manifest.size(), kMaxArtifactManifestBytes);
}

TEST(ArtifactFormat, VersionsOtherThanTheCurrentAreRefusedAsVersion) {
  const Artifact a = two_segments_and_a_checkpoint();
  for (const std::uint8_t version : {1, 2, 3, 5}) {
    engine::Bytes bytes = encode_artifact(a);
    bytes[8] = version;
    EXPECT_EQ(kind_of(bytes, a.model), ArtifactError::Kind::version) << int{version};
  }
}

}  // namespace
}  // namespace prefixd::cache
