// prefixd bench — the restart workload on a disk tier, from a results file: cold, RAM-warm and
// after-restart TTFT and their ratios per restart, the tokens that came back, and the restore's
// bandwidth against the same bytes read sequentially from one cold file. The restart checks
// (bench/checks.h) and the report's section read the same facts. Pure functions of the JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/stats.h"

namespace prefixd::bench {

struct RestartFacts {
  bool disk = false;                       // some after-restart request carries disk facts
  int restarts = 0;                        // after-restart requests that answered
  Summary cold_ms;                         // TTFT of the first send (cold)
  Summary warm_ms;                         // TTFT of the warm resends (the server's memory)
  Summary restart_ms;                      // TTFT of the resends after a restart
  // Per after-restart request: its repetition's cold TTFT ÷ its own, and its own ÷ its
  // repetition's median warm TTFT.
  std::vector<double> cold_over_restart;
  std::vector<double> restart_over_warm;
  std::int64_t prompt_tokens = -1;         // the largest prompt of an after-restart request
  std::int64_t fewest_cached = -1;         // the fewest cached tokens of one
  std::int64_t most_missing = -1;          // the most prompt − cached of one (-1: none reported)
  // Per restore (after-restart request with disk facts): files and bytes it read, its bandwidth
  // (read bytes ÷ read seconds, open to verified), the yardstick's, and restore ÷ yardstick.
  std::vector<double> files_read;
  std::vector<double> bytes_read;
  std::vector<double> restore_bytes_per_s;
  std::vector<double> sequential_bytes_per_s;
  std::vector<double> bandwidth_fraction;
  // The page-cache drops before those requests: files and bytes dropped (the most of one drop),
  // and the most bytes mincore still found resident after one.
  std::int64_t dropped_files = 0;
  std::uint64_t dropped_bytes = 0;
  std::uint64_t resident_after_drop = 0;
  int unsettled_write_behind = 0;          // restarts whose write-behind had not settled
};
RestartFacts restart_facts(const nlohmann::json& target_record);

// "25.3× (21.0–29.6×)" for several values, "25.3×" for one, "n/a" for none.
std::string ratio_spread_cell(const std::vector<double>& ratios);

// The report's block for a workload run with a disk tier: one row per target (those without a
// disk tier show their after-restart re-prefill), then how the numbers were taken. Empty when no
// target has disk facts.
std::string restart_disk_block(const nlohmann::json& workload, const std::vector<std::string>& names);

}  // namespace prefixd::bench
