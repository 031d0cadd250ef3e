// The restart workload on a disk tier, without a server: the scratch directory, the page-cache
// drop and the sequential-read yardstick on real files, the disk counters of /v1/cache/stats, the
// wait for the write-behind, the restart facts, checks and report block on made-up runs.
#include <gtest/gtest.h>
#include <sys/vfs.h>

#include <fstream>
#include <linux/magic.h>
#include <map>

#include "bench/checks.h"
#include "bench/disk_tier.h"
#include "bench/report.h"
#include "bench/report_disk.h"
#include "bench/target.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

namespace fs = std::filesystem;

// tmpfs keeps every page in memory whatever the advice: nothing there can be dropped.
bool page_cache_droppable(const fs::path& dir) {
  struct statfs st {};
  return ::statfs(dir.c_str(), &st) == 0 && st.f_type != TMPFS_MAGIC && st.f_type != RAMFS_MAGIC;
}

void write_file(const fs::path& path, std::size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  std::string block(4096, 'x');
  for (std::size_t left = bytes; left > 0;) {
    const std::size_t n = std::min(left, block.size());
    out.write(block.data(), static_cast<std::streamsize>(n));
    left -= n;
  }
}

void read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(all.empty());
}

TEST(BenchDiskTier, ScratchDirGoesWithEverythingInIt) {
  fs::path root;
  {
    const ScratchDir dir("");
    root = dir.root();
    EXPECT_TRUE(fs::is_directory(dir.tier()));
    EXPECT_EQ(dir.probe_file().parent_path(), root) << "the yardstick lives next to the tier: same filesystem";
    fs::create_directories(dir.tier() / "sub");
    write_file(dir.tier() / "sub" / "a", 100);
  }
  EXPECT_FALSE(fs::exists(root));
  EXPECT_THROW(ScratchDir("/nonexistent/prefixd-bench"), std::runtime_error);
}

TEST(BenchDiskTier, DroppedFilesLeaveThePageCache) {
  const ScratchDir dir("");
  fs::create_directories(dir.tier() / "ab");
  write_file(dir.tier() / "one", 1 << 20);
  write_file(dir.tier() / "ab" / "two", 300'000);
  read_file(dir.tier() / "one");
  read_file(dir.tier() / "ab" / "two");
  EXPECT_GT(resident_bytes(dir.tier() / "one").value_or(0), 0u) << "just written and read: in memory";
  const PageCacheDrop drop = drop_page_cache(dir.tier());
  EXPECT_EQ(drop.files, 2);
  EXPECT_EQ(drop.bytes, (1u << 20) + 300'000u);
  EXPECT_EQ(drop.failed, 0);
  if (!page_cache_droppable(dir.tier())) GTEST_SKIP() << "tmpfs: pages cannot leave memory";
  EXPECT_EQ(drop.resident_bytes, 0u);
  EXPECT_EQ(resident_bytes(dir.tier() / "one"), 0u);
  EXPECT_EQ(resident_bytes(dir.tier() / "ab" / "two"), 0u);
}

TEST(BenchDiskTier, SequentialReadReadsEveryByteOfAColdFileAndRemovesIt) {
  const ScratchDir dir("");
  const std::uint64_t bytes = 2 * kSequentialBlock + 12345;  // two full blocks and a short one
  const SequentialRead r = sequential_read(dir.probe_file(), bytes);
  EXPECT_EQ(r.bytes, bytes);
  EXPECT_GT(r.seconds, 0);
  EXPECT_GT(r.bytes_per_second(), 0);
  EXPECT_FALSE(fs::exists(dir.probe_file()));
  if (page_cache_droppable(dir.root())) {
    EXPECT_EQ(r.resident_before, 0u) << "the read starts cold";
  }
  EXPECT_THROW(sequential_read(dir.root() / "missing" / "file", 10), std::runtime_error);
}

nlohmann::json stats_with_disk(std::uint64_t queue, std::int64_t writes, std::int64_t reads = 0,
                               std::uint64_t read_bytes = 0, double read_seconds = 0) {
  return {{"tiers",
           {{"host", {{"entries", 3}}},
            {"disk",
             {{"enabled", true}, {"entries", writes}, {"bytes", writes * 1000}, {"tokens", writes * 256},
              {"queue_bytes", queue}, {"writes", writes}, {"write_bytes", writes * 1000}, {"writes_dropped", 0},
              {"write_errors", 0}, {"reads", reads}, {"read_bytes", read_bytes}, {"read_seconds", read_seconds},
              {"read_errors", 0}, {"hits", reads > 0 ? 1 : 0}}}}}};
}

TEST(BenchDiskTier, CountersOfCacheStatsAndTheReadsBetweenTwo) {
  const auto before = disk_counters(stats_with_disk(0, 4, 2, 2000, 0.5));
  const auto after = disk_counters(stats_with_disk(512, 6, 7, 12000, 1.5));
  ASSERT_TRUE(before && after);
  EXPECT_TRUE(after->enabled);
  EXPECT_EQ(after->files, 6);
  EXPECT_EQ(after->queue_bytes, 512u);
  EXPECT_EQ(after->tokens, 6 * 256);
  const DiskReads d = reads_between(*before, *after);
  EXPECT_EQ(d.reads, 5);
  EXPECT_EQ(d.bytes, 10000u);
  EXPECT_DOUBLE_EQ(d.seconds, 1.0);
  EXPECT_DOUBLE_EQ(d.bytes_per_second(), 10000.0);
  EXPECT_EQ(reads_between(*after, *before).bytes, 0u) << "a restarted server's counters start again: never negative";
  EXPECT_FALSE(disk_counters(nlohmann::json{{"tiers", {{"host", nlohmann::json::object()}}}}));
  EXPECT_FALSE(disk_counters(nlohmann::json::array()));
}

// /v1/cache/stats readings handed out one per call; the last repeats.
struct StatsSequence {
  std::vector<nlohmann::json> readings;
  std::size_t calls = 0;
  std::optional<nlohmann::json> operator()() {
    const std::size_t i = std::min(calls++, readings.size() - 1);
    return readings[i];
  }
};

TEST(BenchDiskTier, WriteBehindWaitsForAnEmptyQueueAndSettledWrites) {
  const WriteBehindTiming fast{.poll = std::chrono::milliseconds(1), .settle = std::chrono::milliseconds(20),
                               .limit = std::chrono::milliseconds(5000)};
  // Queued, then written, then (after a pause with an empty queue) one more donation is written.
  StatsSequence seq{.readings = {stats_with_disk(900, 1), stats_with_disk(0, 2), stats_with_disk(0, 2),
                                 stats_with_disk(300, 2), stats_with_disk(0, 3)}};
  const WriteBehind w = wait_write_behind(std::ref(seq), fast);
  EXPECT_TRUE(w.settled);
  EXPECT_EQ(w.counters.writes, 3) << "a pause shorter than the settle time is not the end";
  EXPECT_EQ(w.counters.queue_bytes, 0u);
  EXPECT_GT(seq.calls, 5u);

  StatsSequence busy{.readings = {stats_with_disk(900, 1)}};
  const WriteBehind stuck = wait_write_behind(std::ref(busy), {.poll = std::chrono::milliseconds(1),
                                                               .settle = std::chrono::milliseconds(5),
                                                               .limit = std::chrono::milliseconds(30)});
  EXPECT_FALSE(stuck.settled);
  EXPECT_GE(stuck.seconds, 0.03);

  StatsSequence none{.readings = {nlohmann::json{{"tiers", {{"disk", {{"enabled", false}}}}}}}};
  EXPECT_TRUE(wait_write_behind(std::ref(none), fast).settled);
  EXPECT_EQ(none.calls, 1u) << "no disk tier: nothing to wait for";
}

TEST(BenchDiskTier, OnlyPrefixdGetsTheDiskPath) {
  ServerSettings s{.model_path = "m.gguf"};
  s.disk_path = "/tmp/x/tier";
  const Target prefixd(TargetKind::prefixd, "prefixd", "/bin/prefixd", {});
  const Target llama(TargetKind::llama_server, "llama-server", "/usr/bin/llama-server", {});
  EXPECT_TRUE(prefixd.has_disk_tier());
  EXPECT_FALSE(llama.has_disk_tier());
  const auto p = prefixd.arguments(s, 9000);
  const auto l = llama.arguments(s, 9001);
  const auto at = std::ranges::find(p, "--cache-disk-path");
  ASSERT_NE(at, p.end());
  EXPECT_EQ(*(at + 1), "/tmp/x/tier");
  for (const auto& a : l) EXPECT_EQ(a.find("disk"), std::string::npos) << a;
  s.disk_path.clear();
  const auto without = prefixd.arguments(s, 9000);
  EXPECT_EQ(std::ranges::find(without, "--cache-disk-path"), without.end());
}

// A workload entry of a results file for the restart workload at `scale` (512 × scale tokens).
nlohmann::json restart_entry(double scale, int reps) {
  const Workload w = make_workload("restart", {.seed = 7, .scale = scale, .words_per_token = 0.7, .reps = reps});
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : w.steps) steps.push_back({{"arm", s.arm}, {"session", s.session}, {"planned_tokens", s.planned_tokens}});
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& a : w.arms) arms.push_back({{"name", a.name}, {"cold", a.cold}, {"pinned", a.pinned}});
  return {{"name", w.name}, {"title", w.title}, {"arms", arms}, {"steps", steps}, {"disk_tier", w.disk_tier}};
}

struct RestartRun {
  double cold_ms = 300'000;
  double warm_ms = 40;
  std::vector<double> restart_ms = {90, 110};
  int prompt = 8200;
  int cached_after = 8199;
  bool disk = true;
  double restore_mib_s = 700;
  double sequential_mib_s = 800;
};

nlohmann::json record_of(const RestartRun& run) {
  constexpr double kMiB = 1024.0 * 1024.0;
  nlohmann::json requests = nlohmann::json::array();
  int step = 0;
  auto add = [&](const char* arm, double ttft, int cached) {
    requests.push_back({{"step", step++}, {"arm", arm}, {"rep", 0}, {"ttft_ms", ttft}, {"prompt_tokens", run.prompt},
                        {"cached", cached}, {"evaluated", run.prompt - cached}, {"completion_tokens", 1}});
  };
  add(kRestartColdArm, run.cold_ms, 0);
  for (int i = 0; i < 2; ++i) add(kRestartWarmArm, run.warm_ms, run.prompt - 1);
  for (double t : run.restart_ms) {
    add(kRestartArm, t, run.disk ? run.cached_after : 0);
    if (!run.disk) continue;
    const double bytes = 100 * kMiB;
    requests.back()["disk"] = {
        {"write_behind", {{"settled", true}}},
        {"page_cache", {{"files", 36}, {"bytes", bytes}, {"resident_bytes", 0}}},
        {"restore", {{"reads", 36}, {"read_bytes", bytes}, {"read_seconds", bytes / (run.restore_mib_s * kMiB)}}},
        {"sequential_read", {{"bytes", bytes}, {"bytes_per_second", run.sequential_mib_s * kMiB}}}};
  }
  return {{"requests", requests}};
}

std::map<std::string, Check::Verdict> verdicts(const std::vector<Check>& checks) {
  std::map<std::string, Check::Verdict> out;
  for (const auto& c : checks) out[c.name] = c.verdict;
  return out;
}

const std::string kTokenGate = "after a restart the prompt comes back from disk (cached >= prompt − 16)";
const std::string kColdGate = "after-restart TTFT <= cold ÷ 20 at 8192+ tokens";
const std::string kWarmGate = "after-restart TTFT <= RAM-warm × 3 at 8192+ tokens";
const std::string kGoal = "goal: disk restore bandwidth >= 0.70 × a sequential read of the same bytes";

TEST(BenchRestartFacts, RatiosPerRestartAgainstTheSameRepetition) {
  RestartRun run;
  run.restart_ms = {100, 150, 200};
  const RestartFacts f = restart_facts(record_of(run));
  EXPECT_TRUE(f.disk);
  EXPECT_EQ(f.restarts, 3);
  EXPECT_EQ(f.cold_over_restart, (std::vector<double>{3000, 2000, 1500}));
  EXPECT_EQ(f.restart_over_warm, (std::vector<double>{2.5, 3.75, 5}));
  EXPECT_EQ(f.fewest_cached, 8199);
  EXPECT_EQ(f.most_missing, 1);
  ASSERT_EQ(f.bandwidth_fraction.size(), 3u);
  EXPECT_NEAR(f.bandwidth_fraction[0], 700.0 / 800.0, 1e-9);
  EXPECT_EQ(f.dropped_files, 36);
  EXPECT_EQ(ratio_spread_cell(f.restart_over_warm), "3.75× (2.50–5.00×)");
  EXPECT_EQ(ratio_spread_cell({}), "n/a");
  EXPECT_FALSE(restart_facts(record_of({.disk = false})).disk);
}

TEST(BenchChecks, RestartGatesAtTheGoalSize) {
  const nlohmann::json at_8k = restart_entry(16, 2);  // 512 × 16 = 8192 tokens
  const auto good = workload_checks(at_8k, record_of({}));
  ASSERT_EQ(good.size(), 4u);
  for (const auto& c : good) EXPECT_EQ(c.verdict, Check::Verdict::pass) << c.name << ": " << c.detail;
  EXPECT_EQ(verdicts(good).count(kTokenGate), 1u);
  EXPECT_EQ(verdicts(good).count(kGoal), 1u) << good.back().name;

  const auto recomputed = verdicts(workload_checks(at_8k, record_of({.cached_after = 4096})));
  EXPECT_EQ(recomputed.at(kTokenGate), Check::Verdict::fail);
  const auto slow = verdicts(workload_checks(at_8k, record_of({.restart_ms = {20'000, 20'000}})));
  EXPECT_EQ(slow.at(kColdGate), Check::Verdict::fail) << "15× faster than cold is not 20×";
  EXPECT_EQ(slow.at(kWarmGate), Check::Verdict::fail);
  const auto warmish = verdicts(workload_checks(at_8k, record_of({.restart_ms = {130, 130}})));
  EXPECT_EQ(warmish.at(kColdGate), Check::Verdict::pass);
  EXPECT_EQ(warmish.at(kWarmGate), Check::Verdict::fail) << "3.25× the warm TTFT";

  // The bandwidth is a goal: missing it is reported and fails nothing.
  const auto slow_disk = workload_checks(at_8k, record_of({.restore_mib_s = 400}));
  EXPECT_EQ(verdicts(slow_disk).at(kGoal), Check::Verdict::miss);
  nlohmann::json as_json = nlohmann::json::array();
  for (const auto& c : slow_disk) as_json.push_back(c.to_json());
  EXPECT_TRUE(checks_passed(as_json));
  EXPECT_EQ(as_json.back().value("verdict", ""), "MISS");
}

TEST(BenchChecks, RestartTimingGatesSkipBelowTheGoalSizeAndNeedADiskTier) {
  const auto small = verdicts(workload_checks(restart_entry(1, 2), record_of({.restart_ms = {1000, 1000}})));
  EXPECT_EQ(small.at(kTokenGate), Check::Verdict::pass);
  EXPECT_EQ(small.at(kColdGate), Check::Verdict::skip) << "512 tokens: a prefill too short to beat 20×";
  EXPECT_EQ(small.at(kWarmGate), Check::Verdict::skip);
  EXPECT_TRUE(workload_checks(restart_entry(16, 2), record_of({.disk = false})).empty())
      << "a server without a disk tier (llama-server) has nothing to restore";
}

TEST(BenchReport, RestartShowsTheDiskTierAgainstARePrefill) {
  nlohmann::json entry = restart_entry(16, 2);
  entry["targets"] = {{"prefixd", record_of({})},
                      {"llama-server", record_of({.cold_ms = 310'000, .restart_ms = {305'000, 300'000}, .disk = false})}};
  const nlohmann::json results = {{"servers", {{{"name", "prefixd"}}, {{"name", "llama-server"}}}}, {"workloads", {entry}}};
  const std::string md = render_report(results, {});
  EXPECT_NE(md.find("| cold ÷ after restart"), std::string::npos) << md;
  EXPECT_NE(md.find("3030× (2727–3333×)"), std::string::npos) << "prefixd: 300 s ÷ 90 and 110 ms";
  EXPECT_NE(md.find("no disk tier"), std::string::npos) << "llama-server re-prefills";
  EXPECT_NE(md.find("8199 of 8200"), std::string::npos);
  EXPECT_NE(md.find("36 files, 100.0 MiB"), std::string::npos);
  EXPECT_NE(md.find("0.88×"), std::string::npos) << "restore ÷ sequential read";
  EXPECT_NE(md.find("mincore found 0.0 MiB still resident"), std::string::npos);
}

}  // namespace
}  // namespace prefixd::bench
