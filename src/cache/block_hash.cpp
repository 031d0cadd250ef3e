#include "cache/block_hash.h"

#include <bit>
#include <cstring>
#include <stdexcept>

#include <blake3.h>

namespace prefixd::cache {
namespace {

// FIPS 180-4 SHA-256 round constants.
constexpr std::array<std::uint32_t, 64> kSha256K = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

void sha256_compress(std::array<std::uint32_t, 8>& state, const std::uint8_t* block) {
  std::array<std::uint32_t, 64> w{};
  for (int i = 0; i < 16; ++i) {
    w[i] = (std::uint32_t(block[4 * i]) << 24) | (std::uint32_t(block[4 * i + 1]) << 16) |
           (std::uint32_t(block[4 * i + 2]) << 8) | std::uint32_t(block[4 * i + 3]);
  }
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t s0 = std::rotr(w[i - 15], 7) ^ std::rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = std::rotr(w[i - 2], 17) ^ std::rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  auto [a, b, c, d, e, f, g, h] = state;
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t s1 = std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25);
    const std::uint32_t ch = (e & f) ^ (~e & g);
    const std::uint32_t t1 = h + s1 + ch + kSha256K[i] + w[i];
    const std::uint32_t s0 = std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22);
    const std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    const std::uint32_t t2 = s0 + maj;
    h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  const std::array<std::uint32_t, 8> add = {a, b, c, d, e, f, g, h};
  for (int i = 0; i < 8; ++i) state[i] += add[i];
}

}  // namespace

HashAlgorithm parse_hash_algorithm(std::string_view name) {
  if (name == "sha256") return HashAlgorithm::sha256;
  if (name == "blake3") return HashAlgorithm::blake3;
  throw std::invalid_argument("unknown hash algorithm '" + std::string(name) + "' (expected sha256 or blake3)");
}

const char* hash_algorithm_name(HashAlgorithm algorithm) {
  return algorithm == HashAlgorithm::sha256 ? "sha256" : "blake3";
}

std::string to_hex(const Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (std::uint8_t byte : digest) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 15]);
  }
  return out;
}

Digest sha256(std::span<const std::uint8_t> data) {
  std::array<std::uint32_t, 8> state = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  size_t offset = 0;
  for (; offset + 64 <= data.size(); offset += 64) sha256_compress(state, data.data() + offset);
  std::array<std::uint8_t, 128> tail{};
  const size_t rest = data.size() - offset;
  if (rest > 0) std::memcpy(tail.data(), data.data() + offset, rest);
  tail[rest] = 0x80;
  const size_t tail_len = rest + 9 <= 64 ? 64 : 128;
  const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - i] = static_cast<std::uint8_t>(bits >> (8 * i));
  sha256_compress(state, tail.data());
  if (tail_len == 128) sha256_compress(state, tail.data() + 64);
  Digest out;
  for (int i = 0; i < 8; ++i) {
    out[4 * i] = static_cast<std::uint8_t>(state[i] >> 24);
    out[4 * i + 1] = static_cast<std::uint8_t>(state[i] >> 16);
    out[4 * i + 2] = static_cast<std::uint8_t>(state[i] >> 8);
    out[4 * i + 3] = static_cast<std::uint8_t>(state[i]);
  }
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
