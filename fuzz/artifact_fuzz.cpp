// Fuzz target: the artifact decoder (cache/artifact.h), which checks a whole artifact file before
// POST /v1/cache/load stores anything of it.
//
// Every input is decoded as it is and again with its checksums recomputed (reseal.h), for the
// model key the file names and for another. Besides the sanitizers, it checks the decoder's
// promises: a refusal is an ArtifactError of a kind a decoder may raise (never a crash or another
// exception); an accepted artifact has segments that tile its prefix from 0 in order and at most
// one checkpoint, at its end, and encoding it gives back an artifact of the same size that decodes
// to the same thing; another model's server refuses it as `model`.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "cache/artifact.h"
#include "fuzz_check.h"
#include "reseal.h"

namespace prefixd::fuzz {
namespace {

using cache::Artifact;
using cache::ArtifactError;
using cache::Digest;

std::uint32_t version_of(std::span<const std::uint8_t> bytes) { return bytes.size() >= 12 ? load_u32(bytes, 8) : 0; }

bool same_record(const cache::Record& a, const cache::Record& b) {
  const cache::RecordMeta& x = a.meta;
  const cache::RecordMeta& y = b.meta;
  return x.kind == y.kind && x.model == y.model && x.ns == y.ns && x.scope == y.scope && x.key == y.key && x.parent == y.parent &&
         x.begin == y.begin && x.window_from == y.window_from && x.created_unix_ms == y.created_unix_ms &&
         x.payload_bytes == y.payload_bytes && x.payload_checksum == y.payload_checksum && x.tokens == y.tokens &&
         a.payload == b.payload;
}

bool same_artifact(const Artifact& a, const Artifact& b) {
  if (a.model != b.model || a.ns != b.ns || a.scope != b.scope || a.salt != b.salt || a.fork != b.fork || a.created_unix_ms != b.created_unix_ms || a.tokens != b.tokens || a.manifest != b.manifest ||
      a.records.size() != b.records.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.records.size(); ++i) {
    if (!same_record(a.records[i], b.records[i])) return false;
  }
  return true;
}

void check_accepted(const Artifact& artifact, std::size_t input_size, const Digest& model) {
  engine::Pos next = 0;
  for (std::size_t i = 0; i < artifact.records.size(); ++i) {
    const cache::RecordMeta& meta = artifact.records[i].meta;
    require(meta.model == model && meta.ns == artifact.ns, "every record belongs to the artifact's model and namespace");
    require(meta.payload_bytes == artifact.records[i].payload.size(), "a record's payload is as long as its header says");
    if (meta.kind == cache::RecordKind::segment) {
      require(meta.begin == next, "segments tile the prefix in order");
      next += static_cast<engine::Pos>(meta.tokens.size());
      require(next <= static_cast<engine::Pos>(artifact.tokens.size()), "segments stay within the prefix");
    } else {
      require(i + 1 == artifact.records.size(), "a checkpoint is the last record");
      require(meta.begin == static_cast<engine::Pos>(artifact.tokens.size()), "a checkpoint ends the prefix");
    }
  }
  const engine::Bytes again = cache::encode_artifact(artifact);
  require(again.size() == input_size, "re-encoding an accepted artifact gives one of the same size");
  require(same_artifact(cache::decode_artifact(again, model, "re-encoded"), artifact),
          "a re-encoded artifact decodes to the same artifact");
}

// True when the artifact was accepted.
bool check(std::span<const std::uint8_t> bytes, const Digest& model) {
  try {
    const Artifact artifact = cache::decode_artifact(bytes, model, "fuzz");
    require(version_of(bytes) >= cache::kOldestArtifactFormatVersion && version_of(bytes) <= cache::kArtifactFormatVersion,
            "only the versions this build reads are accepted");
    check_accepted(artifact, bytes.size(), model);
    return true;
  } catch (const ArtifactError& e) {
    const auto kind = e.kind();
    require(kind == ArtifactError::Kind::version || kind == ArtifactError::Kind::model || kind == ArtifactError::Kind::corrupt,
            "a decoder refuses only as version, model or corrupt");
    require(std::strlen(e.what()) > 0, "a refusal says why");
    return false;
  }
}

void check_both_models(std::span<const std::uint8_t> bytes) {
  constexpr std::size_t kModelAt = 16;
  Digest own{};
  if (bytes.size() >= kModelAt + own.size()) std::memcpy(own.data(), bytes.data() + kModelAt, own.size());
  const bool accepted = check(bytes, own);
  Digest other = own;
  other[0] ^= 0xff;
  if (!accepted) {
    check(bytes, other);
    return;
  }
  try {
    cache::decode_artifact(bytes, other, "fuzz");
    require(false, "an artifact is refused by another model's server");
  } catch (const ArtifactError& e) {
    require(e.kind() == ArtifactError::Kind::model, "another model's server refuses it as `model`");
  }
}

}  // namespace
}  // namespace prefixd::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The resealer must agree with the encoder, or resealed inputs would test nothing.
  prefixd::cache::Artifact artifact;
  artifact.tokens = {5, 6, 7};
  artifact.manifest = R"({"id":"m"})";
  prefixd::cache::Record segment;
  segment.meta.tokens = artifact.tokens;
  segment.payload = {1, 2, 3};
  artifact.records.push_back(segment);
  std::vector<std::uint8_t> bytes = prefixd::cache::encode_artifact(artifact);
  std::vector<std::uint8_t> copy = bytes;
  constexpr std::size_t kHeaderChecksumAt = 160;  // the last fixed field
  const std::size_t record_checksums_at = bytes.size() - segment.payload.size() - 4 * segment.meta.tokens.size() - 16;
  std::memset(copy.data() + kHeaderChecksumAt, 0, 8);
  std::memset(copy.data() + record_checksums_at, 0, 16);
  prefixd::fuzz::require(prefixd::fuzz::reseal_artifact(copy) && copy == bytes, "reseal_artifact matches encode_artifact");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> input(data, size);
  prefixd::fuzz::check_both_models(input);
  std::vector<std::uint8_t> sealed(input.begin(), input.end());
  if (prefixd::fuzz::reseal_artifact(sealed)) prefixd::fuzz::check_both_models(sealed);
  return 0;
}
