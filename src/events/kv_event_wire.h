// prefixd events — KV events on the wire: vLLM's encoding, which NVIDIA Dynamo's KV router and
// llm-d's KV-cache indexer decode.
//
// A message is three ZeroMQ frames: the topic, the batch's sequence number (8 bytes, big-endian)
// and the payload, a MessagePack array [timestamp (float seconds since the epoch), [event...]].
// Each event is an array whose first element names it:
//   ["BlockStored", [hash...], parent hash | nil, [token id...], block_size, lora_id | nil, medium,
//    lora_name (only when the blocks were computed under LoRA adapters)]
//   ["BlockRemoved", [hash...], medium]
//   ["AllBlocksCleared"]
// A hash is the block's chain hash (block_hash.h): by default an unsigned 64-bit integer, its last
// 8 bytes read big-endian (vLLM's integer block hashes); as `bytes`, the whole 32-byte digest.
// lora_name is the adapters' label (cache::BlocksStored::adapter: "name" or "a@0.5+b"), lora_id
// lora_id_of(lora_name); both are absent (nil, and no eighth field) for the base model.
// Media: the device tier is "GPU" (vLLM's name for the engine's own KV memory, whatever the
// device), the host tier "CPU" (vLLM's CPU offload), the disk tier "DISK".
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "cache/kv_events.h"

namespace prefixd::events {

enum class HashFormat { integer, bytes };
std::optional<HashFormat> parse_hash_format(std::string_view name);  // "int" or "bytes"

const char* wire_medium(cache::Medium medium);  // "GPU", "CPU", "DISK"

// A LoRA label's lora_id: FNV-1a of its bytes, 63 bits (the same label, the same id on every server).
std::int64_t lora_id_of(std::string_view lora_name);

// The hash as the wire carries it in integer form.
std::uint64_t hash_as_integer(const cache::Digest& digest);

// The payload of one batch.
std::string encode_batch(std::span<const cache::KvEvent> events, double timestamp, std::int32_t block_size,
                         HashFormat format);

// A decoded batch, as a subscriber sees it. A hash is its integer form, or the integer form of the
// digest it carries (the last 8 bytes), so either format decodes to the same keys.
struct WireStored {
  std::vector<std::uint64_t> hashes;
  std::optional<std::uint64_t> parent;
  std::vector<std::int64_t> tokens;
  std::int64_t block_size = 0;
  std::string medium;
  std::optional<std::int64_t> lora_id;
  std::string lora_name;
};
struct WireRemoved {
  std::vector<std::uint64_t> hashes;
  std::string medium;
};
struct WireCleared {};
using WireEvent = std::variant<WireStored, WireRemoved, WireCleared>;
struct WireBatch {
  double timestamp = 0;
  std::vector<WireEvent> events;
};
// Decodes a payload; the error says what is malformed. Unknown event tags are skipped (a newer
// publisher may send more kinds), trailing fields of known ones are ignored.
std::expected<WireBatch, std::string> decode_batch(std::span<const std::uint8_t> payload);

// The sequence number frame.
std::string sequence_frame(std::int64_t seq);
std::optional<std::int64_t> parse_sequence_frame(std::span<const std::uint8_t> frame);

}  // namespace prefixd::events
