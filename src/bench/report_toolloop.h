// prefixd bench — the toolloop workload's own table: per turn, what each server fed and how long
// it took, as ratios with their spread over interleaved repetitions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

// Per turn and server: median fed tokens (timings.prompt_n), median TTFT (client) and median
// prefill (timings.prompt_ms, server side) per request, and per pair of servers the ratio of the
// per-repetition medians (median, min–max). TTFT ends at the first streamed piece: for a tool
// call that is the call's opening delta, which a server sends only once it has the call's name,
// so the server-side prefill is the column that compares prompt work alone. "" for another
// workload.
std::string toolloop_block(const nlohmann::json& workload, const std::vector<std::string>& names);

}  // namespace prefixd::bench
