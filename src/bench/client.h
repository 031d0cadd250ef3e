// prefixd bench — the HTTP calls the scenarios (and `prefixd-bench audit`) make, each on its own
// connection.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>

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

// An answer as it came: status (0 when none came) and body.
struct HttpReply {
  int status = 0;
  std::string body;
};

// Where a client sends its requests, and as whom.
struct ClientTarget {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string api_key;  // non-empty: sent as `Authorization: Bearer KEY` on every request
};

class BenchClient {
 public:
  BenchClient(int port, std::chrono::seconds read_timeout) : BenchClient(ClientTarget{.port = port}, read_timeout) {}
  BenchClient(ClientTarget target, std::chrono::seconds read_timeout)
      : target_(std::move(target)), read_timeout_(read_timeout) {}

  // POSTs `body` with "stream": true to `path` and reads the stream, timing the first token.
  // Never throws for HTTP-level failures: they land in CompletionResult::error.
  // `cancel_after_reads` > 0: the client hangs up after that many reads once the first token has
  // arrived, as a user who stops a reply does (CompletionResult::cancelled, no error).
  // `give_up_after` > 0: the client hangs up when the reply has not ended that long after it was
  // sent, whether or not anything came (CompletionResult::cancelled), as an editor drops a
  // completion the user typed past.
  CompletionResult stream(const std::string& path, nlohmann::json body, int cancel_after_reads = 0,
                          std::chrono::milliseconds give_up_after = std::chrono::milliseconds(0)) const;
  // POSTs `body` with "stream": false and reads the whole answer (text, finish reason, usage,
  // prompt_cache, timings). Never throws for HTTP-level failures.
  CompletionResult complete(const std::string& path, nlohmann::json body) const;
  // POSTs `body` as it is; status 0 when no answer came. Never throws.
  HttpReply post_raw(const std::string& path, const std::string& body, const std::string& content_type) const;
  // GETs `path`; status 0 when no answer came. Never throws.
  HttpReply get_raw(const std::string& path) const;

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
  using Reply = HttpReply;
  Reply send(const std::string& method, const std::string& path, const std::string& body) const;

  ClientTarget target_;
  std::chrono::seconds read_timeout_;
};

}  // namespace prefixd::bench
