#include "events/kv_event_wire.h"

#include <cstring>
#include <format>

#include <msgpack.hpp>

namespace prefixd::events {

namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<std::uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

void pack_hash(Packer& pk, const cache::Digest& digest, HashFormat format) {
  if (format == HashFormat::integer) {
    pk.pack_uint64(hash_as_integer(digest));
    return;
  }
  pk.pack_bin(static_cast<std::uint32_t>(digest.size()));
  pk.pack_bin_body(reinterpret_cast<const char*>(digest.data()), static_cast<std::uint32_t>(digest.size()));
}

void pack_hashes(Packer& pk, const std::vector<cache::Digest>& hashes, HashFormat format) {
  pk.pack_array(static_cast<std::uint32_t>(hashes.size()));
  for (const cache::Digest& h : hashes) pack_hash(pk, h, format);
}

// Decoding: each helper names what it found wrong.
using msgpack::object;

std::expected<std::uint64_t, std::string> read_hash(const object& o) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) return o.via.u64;
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return static_cast<std::uint64_t>(o.via.i64);
  if (o.type == msgpack::type::BIN && o.via.bin.size >= 8) {
    std::uint64_t v = 0;
    const auto* tail = reinterpret_cast<const std::uint8_t*>(o.via.bin.ptr) + o.via.bin.size - 8;
    for (int i = 0; i < 8; ++i) v = (v << 8) | tail[i];
    return v;
  }
  return std::unexpected("a block hash is neither an integer nor at least 8 bytes");
}

std::expected<std::vector<std::uint64_t>, std::string> read_hashes(const object& o) {
  if (o.type != msgpack::type::ARRAY) return std::unexpected("block hashes are not an array");
  std::vector<std::uint64_t> out;
  out.reserve(o.via.array.size);
  for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
    auto h = read_hash(o.via.array.ptr[i]);
    if (!h) return std::unexpected(h.error());
    out.push_back(*h);
  }
  return out;
}

std::string read_medium(const object& o) {
  if (o.type != msgpack::type::STR) return {};  // nil: the publisher's default (vLLM: GPU)
  return std::string(o.via.str.ptr, o.via.str.size);
}

std::expected<WireEvent, std::string> read_event(const object& o, bool& known) {
  known = false;
  if (o.type != msgpack::type::ARRAY || o.via.array.size == 0 || o.via.array.ptr[0].type != msgpack::type::STR) {
    return std::unexpected("an event is not an array starting with its name");
  }
  const object* f = o.via.array.ptr;
  const std::uint32_t n = o.via.array.size;
  const std::string_view tag(f[0].via.str.ptr, f[0].via.str.size);
  if (tag == "AllBlocksCleared") {
    known = true;
    return WireCleared{};
  }
  if (tag == "BlockRemoved") {
    if (n < 2) return std::unexpected("BlockRemoved has no hashes");
    auto hashes = read_hashes(f[1]);
    if (!hashes) return std::unexpected(hashes.error());
    known = true;
    return WireRemoved{std::move(*hashes), n > 2 ? read_medium(f[2]) : std::string()};
  }
  if (tag == "BlockStored") {
    if (n < 5) return std::unexpected(std::format("BlockStored has {} fields, at least 5 expected", n - 1));
    WireStored stored;
    auto hashes = read_hashes(f[1]);
    if (!hashes) return std::unexpected(hashes.error());
    stored.hashes = std::move(*hashes);
    if (f[2].type != msgpack::type::NIL) {
      auto parent = read_hash(f[2]);
      if (!parent) return std::unexpected("the parent " + parent.error());
      stored.parent = *parent;
    }
    if (f[3].type != msgpack::type::ARRAY) return std::unexpected("BlockStored's token ids are not an array");
    for (std::uint32_t i = 0; i < f[3].via.array.size; ++i) {
      const object& t = f[3].via.array.ptr[i];
      if (t.type == msgpack::type::POSITIVE_INTEGER) {
        stored.tokens.push_back(static_cast<std::int64_t>(t.via.u64));
      } else if (t.type == msgpack::type::NEGATIVE_INTEGER) {
        stored.tokens.push_back(t.via.i64);
      } else {
        return std::unexpected("a token id is not an integer");
      }
    }
    if (f[4].type != msgpack::type::POSITIVE_INTEGER) return std::unexpected("BlockStored's block size is not a positive integer");
    stored.block_size = static_cast<std::int64_t>(f[4].via.u64);
    if (n > 5 && f[5].type == msgpack::type::POSITIVE_INTEGER) stored.lora_id = static_cast<std::int64_t>(f[5].via.u64);
    if (n > 6) stored.medium = read_medium(f[6]);
    if (n > 7 && f[7].type == msgpack::type::STR) stored.lora_name.assign(f[7].via.str.ptr, f[7].via.str.size);
    known = true;
    return stored;
  }
  return WireCleared{};  // unknown: skipped by the caller
}

}  // namespace

std::int64_t lora_id_of(std::string_view lora_name) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (const char c : lora_name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return static_cast<std::int64_t>(h & 0x7fffffffffffffffull);
}

std::optional<HashFormat> parse_hash_format(std::string_view name) {
  if (name == "int") return HashFormat::integer;
  if (name == "bytes") return HashFormat::bytes;
  return std::nullopt;
}

const char* wire_medium(cache::Medium medium) {
  switch (medium) {
    case cache::Medium::device: return "GPU";
    case cache::Medium::host: return "CPU";
    case cache::Medium::disk: return "DISK";
  }
  return "";
}

std::uint64_t hash_as_integer(const cache::Digest& digest) {
  std::uint64_t v = 0;
  for (std::size_t i = digest.size() - 8; i < digest.size(); ++i) v = (v << 8) | digest[i];
  return v;
}

std::string encode_batch(std::span<const cache::KvEvent> events, double timestamp, std::int32_t block_size,
                         HashFormat format) {
  msgpack::sbuffer buffer;
  Packer pk(&buffer);
  pk.pack_array(2);
  pk.pack_double(timestamp);
  pk.pack_array(static_cast<std::uint32_t>(events.size()));
  for (const cache::KvEvent& event : events) {
    if (const auto* stored = std::get_if<cache::BlocksStored>(&event)) {
      pk.pack_array(stored->adapter.empty() ? 7 : 8);
      pack_str(pk, "BlockStored");
      pack_hashes(pk, stored->hashes, format);
      if (stored->parent) {
        pack_hash(pk, *stored->parent, format);
      } else {
        pk.pack_nil();
      }
      pk.pack_array(static_cast<std::uint32_t>(stored->tokens.size()));
      for (engine::Token t : stored->tokens) pk.pack_int32(t);
      pk.pack_int32(block_size);
      if (stored->adapter.empty()) {
        pk.pack_nil();  // lora_id: the base model
      } else {
        pk.pack_int64(lora_id_of(stored->adapter));
      }
      pack_str(pk, wire_medium(stored->medium));
      if (!stored->adapter.empty()) pack_str(pk, stored->adapter);  // lora_name
    } else if (const auto* removed = std::get_if<cache::BlocksRemoved>(&event)) {
      pk.pack_array(3);
      pack_str(pk, "BlockRemoved");
      pack_hashes(pk, removed->hashes, format);
      pack_str(pk, wire_medium(removed->medium));
    } else {
      pk.pack_array(1);
      pack_str(pk, "AllBlocksCleared");
    }
  }
  return std::string(buffer.data(), buffer.size());
}

std::expected<WireBatch, std::string> decode_batch(std::span<const std::uint8_t> payload) {
  msgpack::object_handle handle;
  try {
    // Every element takes at least a byte: a count larger than the payload is a lie, refused
    // before it becomes an allocation of that many objects.
    const std::size_t n = payload.size();
    const msgpack::unpack_limit limit(n, n / 2, n, n, n, 16);
    handle = msgpack::unpack(reinterpret_cast<const char*>(payload.data()), n, nullptr, nullptr, limit);
  } catch (const std::exception& e) {
    return std::unexpected(std::string("not MessagePack: ") + e.what());
  }
  const object& root = handle.get();
  if (root.type != msgpack::type::ARRAY || root.via.array.size < 2) {
    return std::unexpected("a batch is not an array [timestamp, events, ...]");
  }
  const object& ts = root.via.array.ptr[0];
  const object& list = root.via.array.ptr[1];
  WireBatch batch;
  if (ts.type == msgpack::type::FLOAT64 || ts.type == msgpack::type::FLOAT32) {
    batch.timestamp = ts.via.f64;
  } else if (ts.type == msgpack::type::POSITIVE_INTEGER) {
    batch.timestamp = static_cast<double>(ts.via.u64);
  } else {
    return std::unexpected("a batch's timestamp is not a number");
  }
  if (list.type != msgpack::type::ARRAY) return std::unexpected("a batch's events are not an array");
  for (std::uint32_t i = 0; i < list.via.array.size; ++i) {
    bool known = false;
    auto event = read_event(list.via.array.ptr[i], known);
    if (!event) return std::unexpected(std::format("event {}: {}", i, event.error()));
    if (known) batch.events.push_back(std::move(*event));
  }
  return batch;
}

std::string sequence_frame(std::int64_t seq) {
  std::string out(8, '\0');
  const auto v = static_cast<std::uint64_t>(seq);
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(v >> (56 - 8 * i));
  return out;
}

std::optional<std::int64_t> parse_sequence_frame(std::span<const std::uint8_t> frame) {
  if (frame.size() != 8) return std::nullopt;
  std::uint64_t v = 0;
  for (std::uint8_t b : frame) v = (v << 8) | b;
  return static_cast<std::int64_t>(v);
}

}  // namespace prefixd::events
