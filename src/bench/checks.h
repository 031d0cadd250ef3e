// prefixd bench — what prefixd's prompt cache should achieve on a workload, judged from the results
// file alone: a warm resend evaluates one token, a growing chat reuses its last prompt, shared and
// simultaneous prefixes are held and evaluated once. `prefixd-bench bench` prints these as
// PASS/FAIL lines; they are pure functions of the JSON, so a test can feed them made-up runs.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

// A target and whether this run met it; `skip` when the run did not measure what it needs;
// `miss` when a goal (not a gate) was not met: reported, but it fails nothing.
struct Check {
  enum class Verdict { pass, fail, skip, miss };
  std::string name;
  Verdict verdict = Verdict::skip;
  std::string detail;  // the numbers behind the verdict
  nlohmann::json to_json() const;
};
Check make_check(std::string name, bool pass, std::string detail);
// A goal: pass when met, else miss.
Check make_goal(std::string name, bool met, std::string detail);
const char* verdict_name(Check::Verdict verdict);

// The checks of one workload (an entry of the results file's "workloads", with its "steps") on
// one target's record; empty for a workload without checks.
std::vector<Check> workload_checks(const nlohmann::json& workload, const nlohmann::json& record);

// The restart workload's gates and goal on a target with a disk tier (none without one): the
// prompt comes back after a restart (cached >= prompt − kRestoreSlack); at kRestartGatePrompt
// planned tokens or more, after-restart TTFT <= cold ÷ kRestartColdSpeedup and <= RAM-warm ×
// kRestartOverWarm (median over restarts; below that size they are skipped: a short prefill is
// too cheap to beat by much); the goal: restore bandwidth >= kRestoreBandwidthGoal × a sequential
// read of the same bytes (median over restarts).
inline constexpr int kRestoreSlack = 16;
inline constexpr int kRestartGatePrompt = 8192;
inline constexpr double kRestartColdSpeedup = 20;
inline constexpr double kRestartOverWarm = 3;
inline constexpr double kRestoreBandwidthGoal = 0.7;

// The prepared workload's checks (bench/checks_prepared.cpp): control calls answered; the first
// request after each prepare feeds exactly prompt − chain tokens (cached = chain); every prepared
// request takes at least the chain and feeds prompt − cached, later sessions the same number of
// tokens past the chain; each cold one feeds its whole prompt; a goal: TTFT cold ÷ prepared above
// 1 (median of (repetition, session) pairs).
std::vector<Check> prepared_checks(const nlohmann::json& workload, const nlohmann::json& record);

// The toolloop workload's checks (bench/checks_toolloop.cpp), on a server that counts a
// conversation's tokens (skipped elsewhere): every reply is one tool call; from turn 2 on each
// request fed exactly prompt − history_tokens (the conversation through the previous reply).
std::vector<Check> toolloop_checks(const nlohmann::json& record);

// The preempt workload's goals (bench/checks.cpp): the hit during the cold prefill answered within
// a few seconds of its time alone; the cold prompt delayed by no more than the hit's time alone.
std::vector<Check> preempt_checks(const nlohmann::json& record);

// True unless some check in `checks` (a JSON array of Check::to_json) failed.
bool checks_passed(const nlohmann::json& checks);

}  // namespace prefixd::bench
