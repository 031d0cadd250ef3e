// prefixd api — what every protocol adapter writes its answers with, whatever the protocol: the
// fields a reply repeats, JSON text, server-sent event frames, response ids and timestamps.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace prefixd::api {

using OrderedJson = nlohmann::ordered_json;

// Which OpenAI object a reply is written as (the other protocols write theirs as a chat).
enum class Endpoint { chat, completion };

// The fields every body and chunk of one response repeats, whatever its protocol.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::chat;
  std::string id;            // "chatcmpl-...", "cmpl-...", "msg_...", "resp_..."
  std::int64_t created = 0;  // Unix seconds
  std::string model;         // the served model id
  bool logprobs = false;     // the request asked for log-probabilities
};

// JSON text that never throws on invalid UTF-8 (it is replaced by U+FFFD).
std::string dump_json(const OrderedJson& value);
std::string dump_json(const nlohmann::json& value);

// Server-sent events: one `data:` line per JSON payload, a blank line after each.
std::string sse_data(const OrderedJson& payload);
std::string sse_data(const nlohmann::json& payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// Unique, unguessable-enough response ids. Thread-safe.
class IdGenerator {
 public:
  IdGenerator();
  std::string next(std::string_view prefix);

 private:
  std::mutex mutex_;
  std::mt19937_64 rng_;
};

std::int64_t unix_seconds();

}  // namespace prefixd::api
