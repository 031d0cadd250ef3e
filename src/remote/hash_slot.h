// prefixd remote — the Redis Cluster key-to-slot function (the cluster specification's HASH_SLOT).
#pragma once

#include <cstdint>
#include <string_view>

namespace prefixd::remote {

inline constexpr int kClusterSlots = 16384;

// CRC16-CCITT, XModem variant (polynomial 0x1021, initial value 0, no reflection, no final XOR):
// the checksum the cluster specification uses. crc16_xmodem("123456789") == 0x31C3.
std::uint16_t crc16_xmodem(std::string_view bytes);

// The slot of `key`: CRC16 of the key mod 16384, or of its hash tag — the bytes between the first
// '{' and the next '}' — when that is non-empty, so "{user1000}.a" and "{user1000}.b" share a slot.
int key_hash_slot(std::string_view key);

}  // namespace prefixd::remote
