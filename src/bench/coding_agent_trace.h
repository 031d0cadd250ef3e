// prefixd bench — the shapes of 48 coding-agent sessions from public SWE-bench trajectories
// (bench/data/coding_agent_sessions.md says where from and how they were measured): token counts
// and the time between calls, no text.
#pragma once

#include <span>
#include <string_view>

namespace prefixd::bench {

struct TraceTurn {
  int appended_tokens;  // what the agent added since its previous call (tool output, notes); 0 for the first call
  int output_tokens;    // what the model wrote in this call (resent in every later call)
  int gap_seconds;      // since the previous call was made (its generation plus the tool run); -1 for the first
};

struct TraceSession {
  std::string_view id;            // the SWE-bench instance
  int first_prompt_tokens;        // system prompt plus the task
  std::span<const TraceTurn> turns;
};

// The shared system prompt in front of every session's task (542 characters at 3.6 per token).
inline constexpr int kTraceSystemTokens = 151;

std::span<const TraceSession> coding_agent_sessions();

}  // namespace prefixd::bench
