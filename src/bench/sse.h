// prefixd bench — reading a completion stream (text/event-stream) as it arrives.
#pragma once

#include <string>

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "bench/result.h"

namespace prefixd::bench {

// Splits raw SSE bytes, fed in arbitrary pieces, into the data payloads of complete events
// (several `data:` lines of one event are joined with '\n'; comments and other fields are
// skipped; CRLF and LF line ends both work).
class SseParser {
 public:
  std::vector<std::string> feed(std::string_view bytes);

 private:
  std::string line_;      // the unfinished line
  std::string data_;      // the data of the unfinished event
  bool has_data_ = false;
};

// Interprets the payloads of an OpenAI-style completion stream (chat or text completion):
// collects the text, the finish reason and the usage/prompt_cache/timings of the final chunk, and
// says when the first token arrived: the first chunk with non-empty text or a finish reason (the
// opening chat chunk carries only the role, which is not a token).
class StreamReader {
 public:
  void feed(std::string_view bytes);
  bool first_token_seen() const { return first_token_seen_; }
  // Chunks so far that carried generated text or a tool-call piece: one per token as both servers
  // stream, so the times at which this grows are the client's inter-token gaps.
  int pieces() const { return pieces_; }
  bool done() const { return done_; }  // [DONE] seen
  // Fields read so far; `error` is set for an {"error": ...} payload or an unparsable one.
  const CompletionResult& result() const { return result_; }

 private:
  void handle(const std::string& payload);
  void handle_native(const nlohmann::json& chunk);

  SseParser parser_;
  CompletionResult result_;
  bool first_token_seen_ = false;
  int pieces_ = 0;
  bool done_ = false;
};

}  // namespace prefixd::bench
