// prefixd-bench compare's restart workload against the real binary on the tiny model: prefixd
// keeps its disk tier across restarts, each after-restart request is restored from disk with the
// tier's page cache dropped, the sequential-read yardstick is recorded next to it, and the scratch
// directory goes at the end.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "bench/checks.h"
#include "bench/disk_tier.h"
#include "bench/executor.h"
#include "bench/target.h"
#include "bench/workload.h"
#include "bench_tiny_config.h"

namespace prefixd::bench {
namespace {

namespace fs = std::filesystem;

TEST(BenchRestart, PrefixdRestoresTheWholePromptFromItsDiskTierAfterEachRestart) {
  const Target target = make_target("prefixd", {.prefixd_bin = PREFIXD_BINARY});
  const ScratchDir parent("");
  RunConfig config = tiny_run_config(parent);
  config.gates = false;
  config.disk_parent = parent.root().string();
  std::ostringstream progress;
  const double words_per_token = measure_words_per_token(target, config, progress);
  const Workload w = make_workload("restart", {.seed = 7, .scale = 1, .words_per_token = words_per_token, .reps = 2});

  const nlohmann::json record = run_workload(target, w, config, progress);
  ASSERT_FALSE(record.contains("error")) << record.value("error", "") << "\n" << progress.str();
  EXPECT_EQ(record.value("restarts", 0), 2);
  const std::string tier = record.at("disk_tier").value("path", "");
  EXPECT_TRUE(tier.starts_with(parent.root().string())) << tier;
  EXPECT_NE(record.value("command", "").find("--cache-disk-path " + tier), std::string::npos);

  int restored = 0;
  for (const auto& r : record.at("requests")) {
    if (r.value("arm", "") != kRestartArm) {
      EXPECT_FALSE(r.contains("disk")) << "only a restart is measured on disk";
      continue;
    }
    ++restored;
    EXPECT_EQ(r.value("tier", ""), "disk") << r.dump();
    EXPECT_GE(r.value("cached", 0), r.value("prompt_tokens", 0) - kRestoreSlack) << r.dump();
    const auto& d = r.at("disk");
    EXPECT_TRUE(d.at("write_behind").value("settled", false)) << "nothing queued was cut short by the restart";
    EXPECT_GT(d.at("page_cache").value("files", 0), 0);
    EXPECT_GT(d.at("restore").value("reads", 0), 0) << d.dump();
    EXPECT_GT(d.at("restore").value("read_bytes", 0u), 0u);
    EXPECT_EQ(d.at("sequential_read").value("bytes", 0u), d.at("restore").value("read_bytes", 1u))
        << "the yardstick reads what the restore read";
  }
  EXPECT_EQ(restored, 2);
  if (HasFailure()) std::cout << progress.str();

  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : w.steps) steps.push_back({{"arm", s.arm}, {"planned_tokens", s.planned_tokens}});
  const auto checks = workload_checks({{"name", "restart"}, {"steps", steps}}, record);
  ASSERT_EQ(checks.size(), 4u);
  EXPECT_EQ(checks[0].verdict, Check::Verdict::pass) << checks[0].name << ": " << checks[0].detail;

  // The run's scratch directory went with it.
  EXPECT_FALSE(fs::exists(fs::path(tier).parent_path()));
  for (const auto& entry : fs::directory_iterator(parent.root())) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("prefixd-bench-disk-")) << entry.path();
  }
}

}  // namespace
}  // namespace prefixd::bench
