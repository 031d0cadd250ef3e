// `prefixd-bench soak` in miniature against the real binary on the tiny model: a few seconds of
// every kind of traffic (sessions, streams, hang-ups, completions, bad requests, cache resets), the
// RSS sampled every second and held against the limit, and the summary, results file and plot
// written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/disk_tier.h"
#include "bench/soak.h"
#include "bench/target.h"

namespace prefixd::bench {
namespace {

namespace fs = std::filesystem;

// AddressSanitizer's shadow memory and the quarantine it holds freed blocks in add hundreds of MiB
// of RSS that no budget accounts: under it the limit gets a margin that leaves it unbound, and the
// rest of the run (every request as expected, the files written) is what the test checks.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kMarginMib = 4096;
#else
constexpr int kMarginMib = 256;  // the tiny model's runtime buffers are small: a tight bound
#endif

TEST(Soak, AShortSoakOnTheTinyModelPassesAndWritesItsResults) {
  const ScratchDir dir("");
  SoakOptions o;
  o.model_path = PREFIXD_TINY_MODEL;
  o.prefixd_bin = PREFIXD_BINARY;
  o.duration = std::chrono::seconds(6);
  o.clients = 4;
  o.parallel = 2;
  o.ctx_size = 4096;
  o.threads = 1;  // two spinning threads on a loaded 2-core machine stall each other
  o.cache_mib = 64;
  o.snapshot_mib = 16;
  o.margin_mib = kMarginMib;
  o.reset_every = std::chrono::seconds(2);
  o.startup_timeout = std::chrono::seconds(60);
  o.request_timeout = std::chrono::seconds(120);
  o.out_dir = (dir.root() / "soak").string();
  std::ostringstream out;
  std::ostringstream progress;
  EXPECT_EQ(run_soak(o, out, progress), 0) << out.str() << progress.str();

  std::ifstream in(fs::path(o.out_dir) / "soak.json");
  const nlohmann::json results = nlohmann::json::parse(in);
  EXPECT_TRUE(results.at("pass").get<bool>()) << results.at("failures").dump();
  const auto& requests = results.at("requests");
  EXPECT_GT(requests.at("chat").at("completed").get<int>() + requests.at("chat, streamed").at("completed").get<int>(), 0);
  EXPECT_GT(requests.at("bad request").at("rejected").get<int>(), 0) << requests.dump();
  EXPECT_GE(requests.at("cache reset").at("completed").get<int>(), 2);
  EXPECT_GE(results.at("rss").size(), 4u) << "a sample a second";
  const auto& budget = results.at("budget");
  EXPECT_EQ(budget.at("cache_bytes").get<std::uint64_t>(), 64ull << 20);
  EXPECT_GT(budget.at("kv_context_bytes").get<std::uint64_t>(), 0u) << "K/V bytes per token times the context";
  EXPECT_EQ(budget.at("model_bytes").get<std::uint64_t>(), fs::file_size(PREFIXD_TINY_MODEL));
  EXPECT_LE(results.at("rss_kb").at("hwm").get<long>() * 1024, budget.at("limit_bytes").get<long>());
  EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / "soak.md"));
  EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / "server.log"));
  if (!find_executable("gnuplot").empty()) {
    EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / "soak.png")) << out.str();
  }
  EXPECT_NE(out.str().find("PASS"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace prefixd::bench
