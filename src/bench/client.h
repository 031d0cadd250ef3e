// prefixd bench — the HTTP calls the scenarios make, each on its own connection.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/prompts.h"
#include "bench/result.h"

namespace prefixd::bench {

// Thrown when the server answers an auxiliary call (stats, tokenize, ...) with an error or not at
// all: the benchmark cannot go on without it.
class HttpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class BenchClient {
 public:
  BenchClient(int port, std::chrono::seconds read_timeout) : port_(port), read_timeout_(read_timeout) {}

  // POSTs `body` with "stream": true to `path` and reads the stream, timing the first token.
  // Never throws for HTTP-level failures: they land in CompletionResult::error.
  CompletionResult stream(const std::string& path, nlohmann::json body) const;

  nlohmann::json get_json(const std::string& path) const;
  nlohmann::json post_json(const std::string& path, const nlohmann::json& body) const;

  // GET /v1/cache/stats; nothing when the server has no such route (404).
  std::optional<nlohmann::json> cache_stats() const;
  // POST /tokenize with the server's chat-prompt settings (BOS added, specials parsed).
  TokenIds tokenize(const std::string& text, bool add_special) const;
  // The token ids /v1/chat/completions would feed for these messages (POST /apply-template,
  // then /tokenize), for counting exactly what a cache could share.
  TokenIds chat_prompt_tokens(const nlohmann::json& messages) const;

 private:
  struct Reply {
    int status = 0;
    std::string body;
  };
  Reply send(const std::string& method, const std::string& path, const std::string& body) const;

  int port_;
  std::chrono::seconds read_timeout_;
};

}  // namespace prefixd::bench
