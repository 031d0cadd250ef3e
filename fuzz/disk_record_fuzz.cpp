// Fuzz target: the disk tier's record decoder (cache/disk_format.h), as the index rebuild reads a
// file (header and token ids only) and as a restore reads it (the whole record).
//
// Every input is decoded as it is and again with its checksums recomputed (reseal.h), against the
// record's own model key, another one and none. Besides the sanitizers, it checks the decoder's
// promises: a valid record's payload is exactly as long as its header says, and encoding the
// decoded record gives back a record of the same size that decodes to the same thing; a verdict
// on the header alone never accepts what the whole record proves wrong in its header, and never
// rejects the header of a valid record.
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "cache/disk_format.h"
#include "fuzz_check.h"
#include "reseal.h"

namespace prefixd::fuzz {
namespace {

using cache::DecodedHeader;
using cache::Digest;
using cache::RecordFault;

bool same_meta(const cache::RecordMeta& a, const cache::RecordMeta& b) {
  return a.kind == b.kind && a.model == b.model && a.ns == b.ns && a.key == b.key && a.parent == b.parent &&
         a.begin == b.begin && a.window_from == b.window_from && a.created_unix_ms == b.created_unix_ms &&
         a.payload_bytes == b.payload_bytes && a.payload_checksum == b.payload_checksum && a.tokens == b.tokens;
}

// What the index rebuild does with a file of `bytes` (cache/disk_directory.cpp, read_record_header):
// reads the fixed header, then the token ids when the header's size fits in the file.
DecodedHeader decode_as_index(std::span<const std::uint8_t> bytes, const Digest* model) {
  std::span<const std::uint8_t> head = bytes.first(std::min(bytes.size(), cache::kRecordHeaderBytes));
  if (const auto size = cache::header_size(head); size && *size <= bytes.size() && *size > head.size()) {
    head = bytes.first(*size);
  }
  return cache::decode_header(head, model, bytes.size());
}

void check(std::span<const std::uint8_t> bytes, const Digest* model) {
  const DecodedHeader header = decode_as_index(bytes, model);
  require(cache::record_fault_name(header.fault) != nullptr, "every fault has a name");
  const cache::DecodedRecord whole = cache::decode_record(bytes, model);
  if (const auto size = cache::header_size(bytes); size && header.fault == RecordFault::none) {
    require(*size == header.size, "header_size agrees with the decoded header");
  }
  if (whole.fault == RecordFault::none) {
    const cache::RecordMeta& meta = whole.record.meta;
    require(header.fault == RecordFault::none, "the header of a valid record is valid on its own");
    require(same_meta(header.meta, meta), "the header alone says what the whole record says");
    require(meta.payload_bytes == whole.record.payload.size(), "a valid record's payload is as long as its header says");
    require(meta.kind == cache::RecordKind::segment || meta.kind == cache::RecordKind::checkpoint, "a known kind");
    require(meta.begin >= 0, "positions are not negative");
    require(model == nullptr || meta.model == *model, "a record of another model is foreign");
    engine::Bytes again = cache::encode_header(meta, whole.record.payload);
    again.insert(again.end(), whole.record.payload.begin(), whole.record.payload.end());
    require(again.size() == bytes.size(), "re-encoding a valid record gives a record of the same size");
    const cache::DecodedRecord round = cache::decode_record(again, model);
    require(round.fault == RecordFault::none && same_meta(round.record.meta, meta) &&
                round.record.payload == whole.record.payload,
            "a re-encoded record decodes to the same record");
  } else if (header.fault == RecordFault::none) {
    // Only the payload can be wrong when the header and its token ids verified.
    require(whole.fault == RecordFault::checksum, "a record whose header verifies fails only on its payload");
  }
}

void check_all_models(std::span<const std::uint8_t> bytes) {
  constexpr std::size_t kModelAt = 8 + 4 + 4;
  check(bytes, nullptr);
  Digest other{};
  other.fill(0xa5);
  check(bytes, &other);
  if (bytes.size() >= kModelAt + other.size()) {
    Digest own{};
    std::memcpy(own.data(), bytes.data() + kModelAt, own.size());
    check(bytes, &own);
  }
}

}  // namespace
}  // namespace prefixd::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The resealer must agree with the encoder, or resealed inputs would test nothing.
  prefixd::cache::RecordMeta meta;
  meta.begin = 7;
  meta.tokens = {1, 2, 3};
  const std::vector<std::uint8_t> payload = {9, 8, 7, 6};
  std::vector<std::uint8_t> bytes = prefixd::cache::encode_header(meta, payload);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  std::vector<std::uint8_t> copy = bytes;
  std::memset(copy.data() + prefixd::cache::kRecordHeaderBytes - 16, 0, 16);
  prefixd::fuzz::require(prefixd::fuzz::reseal_record(copy) && copy == bytes, "reseal_record matches encode_header");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> input(data, size);
  prefixd::fuzz::check_all_models(input);
  std::vector<std::uint8_t> sealed(input.begin(), input.end());
  if (prefixd::fuzz::reseal_record(sealed)) prefixd::fuzz::check_all_models(sealed);
  return 0;
}
