// prefixd cache — artifacts: a cached prefix saved under a name, to be loaded back later (after a
// restart, on another machine with the same model file and settings).
//
// One file: a header (magic, format version, model key, namespace digest, scope, the lineage's
// fork and salt, the prefix's tokens, the record count, the manifest, a checksum of all of it),
// then the prefix's records, each in the disk tier's
// self-verifying encoding (disk_format.h): its attention segments in position order and, for
// models that resume only at checkpoints, the checkpoint at its end. Loading verifies the header
// and every record before anything is stored, so a refused artifact changes nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/disk_format.h"

namespace prefixd::cache {

// 2: the header names the scope and the lineage's fork (session isolation); records carry scopes.
// 3: the header carries a manifest after the token ids (its length, then its bytes), under the
// header checksum.
// 4: the namespace digest no longer covers the chat template, tools or tool_choice, and records are
// disk format 3. Earlier files name namespaces no request has any more, so they are refused by
// version (save the prefix again).
inline constexpr std::uint32_t kArtifactFormatVersion = 4;
inline constexpr std::uint32_t kOldestArtifactFormatVersion = 4;
// The largest manifest an artifact carries; the encoder refuses a longer one.
inline constexpr std::size_t kMaxArtifactManifestBytes = 16 * 1024 * 1024;

class ArtifactError : public std::runtime_error {
 public:
  // scope: the artifact belongs to another scope than the one loading it.
  enum class Kind { not_found, nothing_cached, model, version, corrupt, io, scope };
  ArtifactError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

struct Artifact {
  Digest model{};
  Digest ns{};
  ScopeId scope{};                     // whose prefix it is; every record carries the same
  std::int32_t fork = kNoFork;         // the lineage its records are addressed in (with `ns`)
  Digest salt{};
  std::uint64_t created_unix_ms = 0;   // when it was written; 0 when encoding: now
  std::vector<engine::Token> tokens;  // the prefix the records rebuild
  // Opaque bytes the caller describes the prefix with (at most kMaxArtifactManifestBytes); the
  // cache stores and returns them and never reads them.
  std::string manifest;
  std::vector<Record> records;         // segments in position order, then at most one checkpoint
};

struct ArtifactInfo {
  std::int32_t tokens = 0;
  std::int32_t segments = 0;
  std::int32_t checkpoints = 0;
  std::uint64_t bytes = 0;  // of the file
  std::string manifest;                    // the artifact's manifest
  std::vector<engine::Token> token_ids;    // the prefix (tokens of them)
};

// The file's bytes. Decoding them again gives back `artifact` (created_unix_ms filled in).
// Throws std::invalid_argument when the manifest is longer than kMaxArtifactManifestBytes.
engine::Bytes encode_artifact(const Artifact& artifact);
// Verifies a whole artifact made for `model` from its bytes; `name` only goes into messages.
// Throws ArtifactError: version (a format version other than 2 or 3), model (another model key),
// corrupt (any checksum, truncation, trailing bytes, or a record that is not part of the prefix).
Artifact decode_artifact(std::span<const std::uint8_t> bytes, const Digest& model, const std::string& name);
// The header of an artifact file alone — model key, namespace, scope, lineage, creation time,
// tokens, manifest; `records` stays empty — verified by its checksum, for any model key, without
// reading the records (a load verifies those). Throws ArtifactError: not_found, io, version,
// corrupt (of the header).
Artifact read_artifact_header(const std::filesystem::path& path);

// Writes atomically (temporary file, fsync, rename, fsync of the directory). Throws ArtifactError
// (io) on failure, leaving no partial file under `path`.
ArtifactInfo write_artifact(const std::filesystem::path& path, const Artifact& artifact);
// Reads and decodes a whole file (decode_artifact). Throws ArtifactError: not_found, io, and
// those of decode_artifact.
Artifact read_artifact(const std::filesystem::path& path, const Digest& model);

}  // namespace prefixd::cache
