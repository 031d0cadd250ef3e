// What the tests of media and of cached chats send and read: chat completions that must succeed,
// their text, and images and sounds that are pure functions of their arguments.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>

#include "api/images/image_input.h"
#include "server_process.h"

namespace prefixd::testing {

// POST /v1/chat/completions, expecting a 200 (a failure names the reply).
inline nlohmann::json chat(httplib::Client& client, const nlohmann::json& request) {
  const auto reply = post_json(client, "/v1/chat/completions", request);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  return reply.body;
}

inline std::string content(const nlohmann::json& reply) {
  return reply["choices"][0]["message"]["content"].get<std::string>();
}

// A 24-bit BMP whose pixels are a pure function of (x, y, shade).
inline std::string bmp(int width, int height, int shade) {
  const int row = (width * 3 + 3) / 4 * 4;
  const auto size = static_cast<std::uint32_t>(54 + row * height);
  std::string out = "BM";
  auto put = [&](std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  for (const std::uint32_t v : {size, 0u, 54u, 40u, static_cast<std::uint32_t>(width), static_cast<std::uint32_t>(height)}) put(v, 4);
  put(1, 2);
  put(24, 2);
  for (const std::uint32_t v : {0u, static_cast<std::uint32_t>(row * height), 2835u, 2835u, 0u, 0u}) put(v, 4);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      out.push_back(static_cast<char>((x * 7 + shade) & 0xFF));
      out.push_back(static_cast<char>((y * 5 + shade * 3) & 0xFF));
      out.push_back(static_cast<char>((x * y + shade) & 0xFF));
    }
    out.append(static_cast<size_t>(row - width * 3), '\0');
  }
  return out;
}

// A mono 16-bit PCM WAV file of `seconds` of a sine at `hertz`, sampled at `rate`.
inline std::string wav(double seconds, double hertz, int rate = 16000) {
  const auto samples = static_cast<std::uint32_t>(seconds * rate);
  std::string out;
  auto put32 = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  auto put16 = [&](std::uint32_t v) {
    for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  out += "RIFF";
  put32(36 + samples * 2);
  out += "WAVEfmt ";
  put32(16);
  put16(1);  // PCM
  put16(1);  // mono
  put32(static_cast<std::uint32_t>(rate));
  put32(static_cast<std::uint32_t>(rate) * 2);
  put16(2);
  put16(16);
  out += "data";
  put32(samples * 2);
  for (std::uint32_t i = 0; i < samples; ++i) {
    const double v = 0.5 * std::sin(2 * M_PI * hertz * i / rate);
    put16(static_cast<std::uint16_t>(static_cast<std::int16_t>(std::lround(v * 32767))));
  }
  return out;
}

// Where the image's positions are: its stand-in (negative) ids in what /tokenize reports.
struct ImagePlace {
  int begin = -1;
  int tokens = 0;
};
inline ImagePlace image_place(httplib::Client& client, const nlohmann::json& request) {
  const auto reply = post_json(client, "/tokenize", {{"messages", request["messages"]}});
  EXPECT_EQ(reply.status, 200) << reply.raw;
  ImagePlace place;
  const nlohmann::json& tokens = reply.body["tokens"];
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].get<int>() >= 0) continue;
    if (place.begin < 0) place.begin = static_cast<int>(i);
    place.tokens += 1;
  }
  EXPECT_GE(place.begin, 0) << "no image positions in " << reply.raw;
  return place;
}

// Waits (up to 30 s) until the disk tier has written everything queued and holds an entry.
inline void wait_for_disk_writes(httplib::Client& client) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const nlohmann::json disk = get_json(client, "/v1/cache/stats").body["tiers"]["disk"];
    if (disk["queue_bytes"] == 0 && disk["entries"].get<int>() >= 1) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

inline std::string base64(const std::string& bytes) { return api::encode_base64(bytes); }

inline std::string data_url(const std::string& bytes) { return "data:image/bmp;base64," + base64(bytes); }

}  // namespace prefixd::testing
