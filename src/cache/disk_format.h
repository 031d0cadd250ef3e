// prefixd cache — the on-disk record: one segment of attention K/V, or one checkpoint, in a file
// that can be verified on its own.
//
// Layout (little-endian, no padding): a fixed header, the token ids, then the engine's state
// bytes. The header carries the model key (the model file's fingerprint and the context settings
// that change K/V), the namespace digest, the record's content address and its parent's, and two
// checksums: XXH3-64 of the payload, and XXH3-64 of the header (with the payload's checksum in it)
// and the token ids. So the header alone — what an index rebuild reads — proves what the file
// claims to hold, and a read of the payload proves the bytes are the ones written.
//
// The same encoding serves the disk tier's files, the records inside an artifact, and (later) the
// values of a shared store. Nothing here touches the file system.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/block_hash.h"
#include "cache/scope.h"
#include "engine/types.h"

namespace prefixd::cache {

// 2: records carry their scope (scope.h).
// 3: namespace digests no longer cover the chat template, tools or tool_choice (namespace v3), so
// a version 2 record names a namespace no request has any more. Files of another version are
// removed at the index rebuild; shared-tier names carry the version, so old values are never read.
inline constexpr std::uint32_t kDiskFormatVersion = 3;

enum class RecordKind : std::uint32_t {
  segment = 1,     // attention K/V of positions [begin, begin + tokens)
  checkpoint = 2,  // the partial state after tokens [0, begin) (recurrent state, window cells)
};
const char* record_kind_name(RecordKind kind);

// What a record describes, without its payload: what an index keeps per file.
struct RecordMeta {
  RecordKind kind = RecordKind::segment;
  Digest model{};        // model key: records of another model are never restored
  Digest ns{};           // namespace digest (32 raw bytes)
  Digest key{};          // content address (host segment key, or checkpoint key)
  Digest parent{};       // segments: chain hash before `begin` (the namespace root at 0)
  engine::Pos begin = 0;  // segments: first position; checkpoints: the state's position
  engine::Pos window_from = 0;  // checkpoints of window-only models (see Checkpoint::window_from)
  std::uint64_t created_unix_ms = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t payload_checksum = 0;
  ScopeId scope{};       // whose record this is (counted per scope, removed with it)
  std::vector<engine::Token> tokens;  // segments: the tokens they hold; checkpoints: none
};

struct Record {
  RecordMeta meta;
  engine::Bytes payload;
};

// Why bytes are not a usable record. `none` means valid.
enum class RecordFault {
  none,
  truncated,    // shorter than the header says (or than a header)
  bad_magic,    // not a prefixd record at all
  version,      // another format version
  checksum,     // header or payload bytes differ from what was written
  foreign,      // made for another model key
};
const char* record_fault_name(RecordFault fault);

// magic, version, kind; model, ns, key, parent; begin, window_from, token count, reserved;
// created, payload bytes, payload checksum; scope; header checksum.
inline constexpr std::size_t kRecordHeaderBytes = 8 + 4 + 4 + 32 * 4 + 4 * 4 + 8 * 3 + 32 + 8;

// Header and token ids (payload_bytes and payload_checksum are taken from `payload`).
engine::Bytes encode_header(const RecordMeta& meta, std::span<const std::uint8_t> payload);
std::uint64_t payload_checksum(std::span<const std::uint8_t> payload);

// The size of the header plus token ids, read from the fixed part of a header; nullopt when
// `fixed` (at least kRecordHeaderBytes) is not a record header of this format.
std::optional<std::size_t> header_size(std::span<const std::uint8_t> fixed);

struct DecodedHeader {
  RecordFault fault = RecordFault::none;
  RecordMeta meta;
  std::size_t size = 0;  // bytes of header and token ids: the payload starts here
  std::uint64_t header_checksum = 0;  // as stored; set once the fixed part is read (for tools)
};
// Decodes and checks a header with its token ids. `expected_model`, when given, makes a record
// of another model `foreign`. `file_bytes`, when given, must equal header + payload.
DecodedHeader decode_header(std::span<const std::uint8_t> bytes, const Digest* expected_model,
                            std::optional<std::uint64_t> file_bytes = std::nullopt);

// Checks a whole record (header, tokens, payload) and returns it.
struct DecodedRecord {
  RecordFault fault = RecordFault::none;
  Record record;
};
DecodedRecord decode_record(std::span<const std::uint8_t> bytes, const Digest* expected_model);

// The key a checkpoint's record is stored under. A checkpoint and the tail segment ending at the
// same position are addressed by the same prefix; their records must not share a name.
Digest checkpoint_record_key(const Digest& checkpoint_key);

// A model key: digest of the model file's fingerprint and the context's runtime signature.
Digest model_key(std::string_view fingerprint, std::string_view runtime_signature);
Digest digest_from(std::string_view raw32);  // 32 raw bytes (a namespace digest) as a Digest
std::string digest_string(const Digest& digest);  // the 32 raw bytes as a string

}  // namespace prefixd::cache
