// prefixd-bench's prepared workload against the real binary on the tiny model: after one POST
// /v1/cache/prepare_modules of a system prompt and a tool schema, the first session's first
// request feeds exactly its own message and every later one takes at least the chain; the cold
// arm (after POST /v1/cache/reset) feeds every prompt whole; the gates pass with the tools replayed.
#include <gtest/gtest.h>

#include <filesystem>
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

TEST(BenchPrepared, APreparedChainLeavesEachFirstRequestOnlyItsOwnMessage) {
  const Target target = make_target("prefixd", {.prefixd_bin = PREFIXD_BINARY});
  const ScratchDir parent("");
  RunConfig config = tiny_run_config(parent);
  std::ostringstream progress;
  const double words_per_token = measure_words_per_token(target, config, progress);
  const Workload w = make_workload("prepared", {.seed = 7, .scale = 1, .words_per_token = words_per_token, .reps = 2});

  const nlohmann::json record = run_workload(target, w, config, progress);
  ASSERT_FALSE(record.contains("error")) << record.value("error", "") << "\n" << progress.str();
  ASSERT_TRUE(record.contains("control"));
  std::int64_t chain = 0;
  for (const auto& c : record.at("control")) {
    EXPECT_EQ(c.value("status", 0), 200) << c.dump();
    if (c.value("arm", "") == kPreparedPrepareArm) chain = c.at("reply").value("tokens", 0);
  }
  ASSERT_GT(chain, 0);
  int prepared = 0;
  int cold = 0;
  int previous_step = -1;
  for (const auto& r : record.at("requests")) {
    const auto prompt = r.value("prompt_tokens", 0);
    const auto fed = r.value("fed_tokens", -1);
    EXPECT_GT(prompt, chain) << r.dump();
    if (r.value("arm", "") == "prepared") {
      ++prepared;
      // The first session after a prepare follows the prepare and its reset (steps k-1, k-2).
      const bool first = r.value("step", 0) != previous_step + 1;
      if (first) {
        EXPECT_EQ(fed, prompt - chain) << "only its own message: " << r.dump();
      }
      EXPECT_GE(r.value("cached", 0), chain) << r.dump();
      EXPECT_EQ(fed, prompt - r.value("cached", 0)) << r.dump();
    } else {
      ++cold;
      EXPECT_EQ(fed, prompt) << r.dump();
    }
    previous_step = r.value("step", 0);
  }
  EXPECT_EQ(prepared, 8);
  EXPECT_EQ(cold, 8);
  ASSERT_TRUE(record.contains("gates"));
  EXPECT_TRUE(gates_passed(record.at("gates"))) << record.at("gates").dump();

  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : w.steps) steps.push_back({{"arm", s.arm}, {"x", s.x}});
  const auto checks = workload_checks({{"name", "prepared"}, {"steps", steps}}, record);
  ASSERT_EQ(checks.size(), 5u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(checks[i].verdict, Check::Verdict::pass) << checks[i].name << ": " << checks[i].detail;
  std::cout << "prepared workload: " << checks[4].name << " — " << checks[4].detail << "\n";
  if (HasFailure()) std::cout << progress.str();
}

}  // namespace
}  // namespace prefixd::bench
