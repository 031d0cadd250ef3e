// prefixd router — the routing decision, as a pure function of what the router knows about each
// healthy backend (so that it can be tested without servers).
//
// Score of a backend for a request: the tokens of the request's prompt it already holds (the
// longest prefix of the request's block chain found in its summary, times the block size) minus
// `load_weight` tokens per request it is running or queueing. Highest score wins; ties go to the
// least loaded, then round-robin from `rotation`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace prefixd::router {

enum class Reason { session, prefix, load, round_robin };
inline constexpr int kReasonCount = 4;
const char* reason_name(Reason reason);

enum class Policy { prefix, round_robin };
Policy parse_policy(std::string_view name);  // throws std::invalid_argument
const char* policy_name(Policy policy);

struct Candidate {
  std::size_t backend = 0;          // index into the router's backends
  std::int64_t matched_blocks = 0;  // leading blocks of the request's chain the backend holds
  std::int64_t load = 0;            // running + queued (its summary) + the router's in-flight requests to it
};

struct Choice {
  std::size_t backend = 0;
  Reason reason = Reason::load;     // prefix when the winner holds part of the prompt, else load
  std::int64_t matched_tokens = 0;
};

// REQUIRES: `candidates` is not empty.
Choice choose_by_prefix(std::span<const Candidate> candidates, std::int32_t block_size, double load_weight,
                        std::size_t rotation);

}  // namespace prefixd::router
