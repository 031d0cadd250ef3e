// prefixd bench — what one soak client sends: a deterministic mix of chat sessions, streams it
// hangs up on, text completions, structured-output chats and bad requests (bench/soak.h).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/prompts.h"
#include "bench/result.h"
#include "bench/soak.h"

namespace prefixd::bench {

// One request to send.
struct SoakRequest {
  SoakKind kind = SoakKind::chat;
  std::string path;
  std::string body;                             // what goes on the wire (not always JSON for a bad one)
  std::string content_type = "application/json";
  int cancel_after_reads = 0;                   // chat_cancel: hang up after this many reads
  int expected_status = 200;                    // invalid: the 4xx it must get
};

// How the mix is shaped; the defaults are what `prefixd-bench soak` sends.
struct SoakShape {
  int system_prompts = 4;         // shared by every client's sessions: cross-session prefix reuse
  int system_words = 220;
  int max_turns = 6;              // a session ends after 2..max_turns turns
  int user_words_min = 10;
  int user_words_max = 50;
  int max_tokens_min = 8;
  int max_tokens_max = 32;
  int ctx_size = 8192;            // a prompt past it is one of the bad requests
  // Per mille of requests, the rest being whole or streamed chat turns.
  int cancel_per_mille = 120;
  int completion_per_mille = 100;
  int invalid_per_mille = 50;
  int constrained_per_mille = 100;  // response_format json_schema, with an enum of constrained_enum_values
  int constrained_enum_values = 2000;
};

// The traffic of client `client`: next() says what to send, answered() takes the result back
// (a chat session continues with the reply the server gave).
class SoakTraffic {
 public:
  SoakTraffic(std::uint64_t seed, int client, SoakShape shape = {});

  SoakRequest next();
  void answered(const SoakRequest& request, const CompletionResult& result);

  int sessions_started() const { return sessions_; }

 private:
  void start_session();
  SoakRequest chat_turn(SoakKind kind);
  SoakRequest completion();
  SoakRequest invalid();
  SoakRequest constrained();
  std::string system_prompt(std::uint64_t index) const;
  int between(int lo, int hi);  // uniform in [lo, hi]

  std::uint64_t seed_;
  int client_;
  SoakShape shape_;
  SeededRng rng_;
  int sessions_ = 0;
  std::string session_;
  nlohmann::json messages_ = nlohmann::json::array();
  int turns_left_ = 0;
};

// Classifies a finished request (bench/soak.h, SoakOutcome); `detail` says why when unexpected.
SoakOutcome classify(const SoakRequest& request, const CompletionResult& result, std::string& detail);

}  // namespace prefixd::bench
