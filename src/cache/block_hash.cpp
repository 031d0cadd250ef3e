#include "cache/block_hash.h"

#include <cstring>
#include <stdexcept>

#include <blake3.h>
#include <openssl/sha.h>

#include "util/hex.h"

namespace prefixd::cache {
HashAlgorithm parse_hash_algorithm(std::string_view name) {
  if (name == "sha256") return HashAlgorithm::sha256;
  if (name == "blake3") return HashAlgorithm::blake3;
  throw std::invalid_argument("unknown hash algorithm '" + std::string(name) + "' (expected sha256 or blake3)");
}

const char* hash_algorithm_name(HashAlgorithm algorithm) {
  return algorithm == HashAlgorithm::sha256 ? "sha256" : "blake3";
}

std::string to_hex(const Digest& digest) { return util::to_hex(digest); }

Digest sha256(std::span<const std::uint8_t> data) {
  Digest out;
  static_assert(sizeof(Digest) == SHA256_DIGEST_LENGTH);
  SHA256(data.data(), data.size(), out.data());
  return out;
}

Digest blake3_digest(std::span<const std::uint8_t> data) {
  blake3_hasher hasher;
  blake3_hasher_init(&hasher);
  blake3_hasher_update(&hasher, data.data(), data.size());
  Digest out;
  blake3_hasher_finalize(&hasher, out.data(), out.size());
  return out;
}

BlockHasher::BlockHasher(HashAlgorithm algorithm, std::int32_t block_size)
    : algorithm_(algorithm), block_size_(block_size) {
  if (block_size < 1) throw std::invalid_argument("block size must be at least 1 token");
}

Digest BlockHasher::hash(std::span<const std::uint8_t> data) const {
  return algorithm_ == HashAlgorithm::sha256 ? sha256(data) : blake3_digest(data);
}

Digest BlockHasher::root(std::string_view namespace_digest) const {
  if (namespace_digest.size() == sizeof(Digest)) {
    Digest out;
    std::memcpy(out.data(), namespace_digest.data(), out.size());
    return out;
  }
  return hash({reinterpret_cast<const std::uint8_t*>(namespace_digest.data()), namespace_digest.size()});
}

Digest BlockHasher::next(const Digest& parent, std::span<const engine::Token> block) const {
  std::vector<std::uint8_t> buffer(parent.size() + block.size() * 4);
  std::memcpy(buffer.data(), parent.data(), parent.size());
  std::uint8_t* out = buffer.data() + parent.size();
  for (engine::Token t : block) {
    const auto v = static_cast<std::uint32_t>(t);
    *out++ = static_cast<std::uint8_t>(v);
    *out++ = static_cast<std::uint8_t>(v >> 8);
    *out++ = static_cast<std::uint8_t>(v >> 16);
    *out++ = static_cast<std::uint8_t>(v >> 24);
  }
  return hash(buffer);
}

Digest BlockHasher::forked(const Digest& parent, const Digest& salt) const {
  static constexpr std::string_view kTag = "prefixd.fork";
  std::array<std::uint8_t, 32 + kTag.size() + 32> buffer{};
  std::memcpy(buffer.data(), parent.data(), parent.size());
  std::memcpy(buffer.data() + parent.size(), kTag.data(), kTag.size());
  std::memcpy(buffer.data() + parent.size() + kTag.size(), salt.data(), salt.size());
  return hash(buffer);
}

std::vector<Digest> BlockHasher::chain(const Lineage& lineage, std::span<const engine::Token> tokens) const {
  std::vector<Digest> out;
  const auto block = static_cast<size_t>(block_size_);
  const size_t blocks = tokens.size() / block;
  out.reserve(blocks);
  Digest h = root(lineage.ns);
  for (size_t i = 0; i < blocks; ++i) {
    const auto begin = static_cast<std::int32_t>(i * block);
    if (lineage.forks_within(begin, begin + block_size_)) h = forked(h, lineage.salt);
    h = next(h, tokens.subspan(i * block, block));
    out.push_back(h);
  }
  return out;
}

Digest BlockHasher::parent(const Lineage& lineage, std::span<const Digest> chain, std::int32_t begin,
                           std::int32_t stop) const {
  const Digest before = begin == 0 ? root(lineage.ns) : chain[static_cast<size_t>(begin / block_size_) - 1];
  return lineage.forks_within(begin, stop) ? forked(before, lineage.salt) : before;
}

std::vector<Digest> BlockHasher::chain(std::string_view namespace_digest, std::span<const engine::Token> tokens) const {
  return chain(Lineage{std::string(namespace_digest)}, tokens);
}

}  // namespace prefixd::cache
