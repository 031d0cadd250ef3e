// prefixd-bench's toolloop workload against the real binary on the tiny model: every turn is a
// forced tool call, the next turn sends the server's own reply back, and from turn 2 on each
// request feeds exactly the tool result and its scaffolding (the workload's checks pass).
#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

#include "bench/checks.h"
#include "bench/disk_tier.h"
#include "bench/executor.h"
#include "bench/gates.h"
#include "bench/target.h"
#include "bench/workload.h"
#include "bench_tiny_config.h"

namespace prefixd::bench {
namespace {

TEST(BenchToolLoop, EachLaterTurnFeedsOnlyTheToolResultAndItsScaffolding) {
  const Target target = make_target("prefixd", {.prefixd_bin = PREFIXD_BINARY});
  const ScratchDir parent("");
  RunConfig config = tiny_run_config(parent);
  std::ostringstream progress;
  const double words_per_token = measure_words_per_token(target, config, progress);
  const Workload w = make_workload("toolloop", {.seed = 7, .scale = 1, .words_per_token = words_per_token, .reps = 2});

  const nlohmann::json record = run_workload(target, w, config, progress);
  ASSERT_FALSE(record.contains("error")) << record.value("error", "") << "\n" << progress.str();
  ASSERT_EQ(record.at("requests").size(), w.steps.size());
  int later = 0;
  for (const auto& r : record.at("requests")) {
    ASSERT_FALSE(r.contains("error")) << r.dump();
    EXPECT_EQ(r.value("finish_reason", ""), "tool_calls") << r.dump();
    if (r.value("arm", "") == "turn 1") {
      EXPECT_FALSE(r.contains("history_tokens"));
      continue;
    }
    ++later;
    const auto prompt = r.value("prompt_tokens", 0);
    const auto history = r.value("history_tokens", -1);
    ASSERT_GT(history, 0) << r.dump();
    EXPECT_EQ(r.value("fed_tokens", -1), prompt - history) << "only the tool result and its scaffolding: " << r.dump();
  }
  EXPECT_EQ(later, 2 * (kToolLoopTurns - 1));
  ASSERT_TRUE(record.contains("gates"));
  EXPECT_TRUE(gates_passed(record.at("gates"))) << record.at("gates").dump();

  const auto checks = workload_checks({{"name", "toolloop"}}, record);
  ASSERT_EQ(checks.size(), 2u);
  for (const auto& c : checks) {
    EXPECT_EQ(c.verdict, Check::Verdict::pass) << c.name << ": " << c.detail;
    std::cout << "toolloop workload: " << c.name << " — " << c.detail << "\n";
  }
  if (HasFailure()) std::cout << progress.str();
}

}  // namespace
}  // namespace prefixd::bench
