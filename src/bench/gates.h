// prefixd bench — correctness gates run on every workload and server: a cache that is fast but
// changes the answer, or a "hit" that ignores the prefix, must show up next to the timings.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/client.h"
#include "bench/result.h"

namespace prefixd::bench {

// Max |logprob difference| over the tokens both top-logprob lists contain (matched by id when both
// have ids, else by token text); nothing when either list is missing or they share no token.
std::optional<double> logprob_max_abs_diff(const nlohmann::json& a, const nlohmann::json& b);

// True when two greedy first tokens differ only as a tie: each reply's top logprobs list both
// tokens, their logprobs in each list are within twice the largest warm/cold difference of any
// token the lists share (at most 0.1 nats). Two batch layouts round differently (warm and cold
// compute the last prompt token in different batches), and between two nearly equally likely
// tokens that rounding picks the winner; both servers show it on the same prompt.
bool first_tokens_tie(const nlohmann::json& warm_logprobs, const std::string& warm_piece,
                      const nlohmann::json& cold_logprobs, const std::string& cold_piece);

// Replays the gate request (`messages`, its own first token `observed_first_piece`) and returns:
// - first_token: greedy first token warm (cached prefix) vs cold (cache_prompt false) — equal, or
//   a tie (first_tokens_tie, reported as such) — with the max abs difference of their top
//   logprobs where the server returns logprobs;
// - determinism: the same bytes twice under two fresh cache keys give identical output;
// - context: a follow-up question after the cached conversation vs the same question alone — the
//   first token or its distribution differs (without logprobs: the short reply differs).
// Asks for logprobs first and drops them if the server refuses (400). `tools` (non-null) goes
// with every replay, as it went with the request.
nlohmann::json run_gates(const BenchClient& client, const nlohmann::json& messages, const std::string& session,
                         const std::string& observed_first_piece, const nlohmann::json& tools = nullptr);

// True when every gate in `gates` (run_gates' answer) passed.
bool gates_passed(const nlohmann::json& gates);

}  // namespace prefixd::bench
