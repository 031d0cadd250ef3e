// prefixd api — the responses the Responses API stored (`store`, on by default): what GET
// /v1/responses/{id} answers, and the conversation a request with `previous_response_id`
// continues, so that a client sends only its new items and the prompt is the cached one token for
// token.
//
// Kept in memory, per tenant (a response is invisible to every other tenant), at most
// `capacity_bytes` of JSON (the least recently used go first) and at most `ttl` old. A restart
// forgets them; the K/V of their conversations is in the prompt cache's tiers like any other.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "api/images/image_input.h"

namespace prefixd::api {

struct StoredResponse {
  nlohmann::ordered_json object;  // the response object as it was sent
  nlohmann::ordered_json conversation;  // its messages (keys as sent), the reply included, instructions excluded
  // The images and audio clips of its conversation, in the order their markers stand in its text
  // (image_input.h): a continuation sends them again with its own.
  std::vector<ImageInput> media;
};

struct ResponseStoreStats {
  std::size_t responses = 0;
  std::size_t bytes = 0;
  std::uint64_t evicted = 0;  // dropped for room or age
};

class ResponseStore {
 public:
  using Clock = std::chrono::steady_clock;
  ResponseStore(std::size_t capacity_bytes, std::chrono::seconds ttl);

  // Replaces a response of the same id. One larger than the whole capacity is not kept.
  void put(const std::string& tenant, const std::string& id, StoredResponse response, Clock::time_point now = Clock::now());
  std::optional<StoredResponse> find(const std::string& tenant, const std::string& id, Clock::time_point now = Clock::now());
  bool erase(const std::string& tenant, const std::string& id);
  ResponseStoreStats stats() const;

 private:
  struct Entry {
    std::string key;
    StoredResponse response;
    std::size_t bytes = 0;
    Clock::time_point stored;
  };
  void drop(std::list<Entry>::iterator it);
  void expire(Clock::time_point now);

  const std::size_t capacity_bytes_;
  const std::chrono::seconds ttl_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  std::size_t bytes_ = 0;
  std::uint64_t evicted_ = 0;
};

}  // namespace prefixd::api
