// prefixd util — lowercase hexadecimal of bytes (digests, keys, file names): the one encoder.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace prefixd::util {

inline std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const std::uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0x0F]);
  }
  return out;
}

inline std::string to_hex(std::string_view bytes) {
  return to_hex(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
}

}  // namespace prefixd::util
