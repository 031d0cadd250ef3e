// prefixd bench — what prefixd's prompt cache should achieve on a workload, judged from the
// results file alone: a warm resend evaluates one token, a growing chat reuses its last prompt,
// shared and simultaneous prefixes are held and evaluated once. `prefixd bench` prints these as
// PASS/FAIL lines; they are pure functions of the JSON, so a test can feed them made-up runs.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

// A target and whether this run met it; `skip` when the run did not measure what it needs.
struct Check {
  enum class Verdict { pass, fail, skip };
  std::string name;
  Verdict verdict = Verdict::skip;
  std::string detail;  // the numbers behind the verdict
  nlohmann::json to_json() const;
};
Check make_check(std::string name, bool pass, std::string detail);
const char* verdict_name(Check::Verdict verdict);

// The checks of one workload (an entry of the results file's "workloads", with its "steps") on
// one target's record; empty for a workload without checks.
std::vector<Check> workload_checks(const nlohmann::json& workload, const nlohmann::json& record);

// True unless some check in `checks` (a JSON array of Check::to_json) failed.
bool checks_passed(const nlohmann::json& checks);

}  // namespace prefixd::bench
