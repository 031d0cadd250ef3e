// prefixd cache — content addresses for prefixes.
//
// A block is `block_size` tokens. The chain starts at the namespace digest (h0) and each block's
// hash covers its parent's hash and its own tokens: h(n) = H(h(n-1) || tokens of block n, as
// little-endian int32). Two servers that load the same model compute the same chain for the same
// prefix, so a chain hash names the same K/V anywhere: it keys the host, disk and shared tiers.
//
// A lineage may fork (session isolation): the first span that reaches past the fork position
// hangs off its parent mixed with a salt, so everything past the fork is addressed differently for
// every salt, while the content before it keeps the namespace's own addresses and stays shared.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
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

// No fork: the whole chain is the namespace's.
inline constexpr std::int32_t kNoFork = std::numeric_limits<std::int32_t>::max();

// How a prompt's content addresses are rooted: the namespace digest, and from position `fork` on,
// a salt. Positions [0, fork) are addressed as in any lineage of the namespace; a block, segment
// or checkpoint that covers position `fork` or later is addressed under the salt alone.
struct Lineage {
  std::string ns;               // namespace digest, 32 raw bytes
  std::int32_t fork = kNoFork;
  Digest salt{};
  bool forks_within(std::int32_t begin, std::int32_t stop) const { return begin <= fork && fork < stop; }
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
  // The same in a lineage: the block covering position `fork` hangs off its parent mixed with the
  // salt (forked()), so it and every later block differ per salt.
  std::vector<Digest> chain(const Lineage& lineage, std::span<const engine::Token> tokens) const;
  // What a span of the prompt starting at `begin` (a block boundary) and ending at `stop` hangs
  // off: the chain hash before it (the root at 0), forked when the span covers the fork.
  // `chain` is chain(lineage, ...) of at least the blocks before `begin`.
  Digest parent(const Lineage& lineage, std::span<const Digest> chain, std::int32_t begin, std::int32_t stop) const;
  // A parent digest mixed with a salt. The input (parent, a domain tag, salt: 76 bytes) has a
  // length no token block (parent + 4 bytes per token) can have.
  Digest forked(const Digest& parent, const Digest& salt) const;

 private:
  Digest hash(std::span<const std::uint8_t> data) const;

  HashAlgorithm algorithm_;
  std::int32_t block_size_;
};

}  // namespace prefixd::cache
