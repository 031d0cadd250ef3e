// prefixd cache — content addresses for prefixes.
//
// A block is `block_size` tokens. The chain starts at the namespace digest (h0) and each block's
// hash covers its parent's hash and its own tokens: h(n) = H(h(n-1) || tokens of block n, as
// little-endian int32). Two servers that load the same model compute the same chain for the same
// prefix, so a chain hash names the same K/V anywhere: it keys the host, disk and shared tiers.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/types.h"

namespace prefixd::cache {

using Digest = std::array<std::uint8_t, 32>;

enum class HashAlgorithm { sha256, blake3 };
HashAlgorithm parse_hash_algorithm(std::string_view name);  // throws std::invalid_argument
const char* hash_algorithm_name(HashAlgorithm algorithm);

std::string to_hex(const Digest& digest);
Digest sha256(std::span<const std::uint8_t> data);
Digest blake3_digest(std::span<const std::uint8_t> data);

struct DigestHash {
  std::size_t operator()(const Digest& d) const noexcept {
    std::size_t h;
    static_assert(sizeof h <= sizeof(Digest));
    __builtin_memcpy(&h, d.data(), sizeof h);
    return h;
  }
};

class BlockHasher {
 public:
  BlockHasher(HashAlgorithm algorithm, std::int32_t block_size);

  std::int32_t block_size() const { return block_size_; }
  HashAlgorithm algorithm() const { return algorithm_; }

  // h0 for a namespace (the namespace digest is 32 raw bytes; any other length is hashed first).
  Digest root(std::string_view namespace_digest) const;
  Digest next(const Digest& parent, std::span<const engine::Token> block) const;
  // Hashes of every whole block of `tokens`: element i covers tokens [0, (i+1) * block_size).
  std::vector<Digest> chain(std::string_view namespace_digest, std::span<const engine::Token> tokens) const;

 private:
  Digest hash(std::span<const std::uint8_t> data) const;

  HashAlgorithm algorithm_;
  std::int32_t block_size_;
};

}  // namespace prefixd::cache
