// The merged benchmark's newer parts on made-up runs: the cache workloads (grow, thrash, burst,
// unique), the checks' verdicts, interleaved repetitions, throughput, per-token prefill cost and a
// one-target report. No model, no server.
#include <gtest/gtest.h>

#include <set>

#include "bench/checks.h"
#include "bench/executor.h"
#include "bench/report.h"
#include "bench/report_stats.h"
#include "bench/target.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

WorkloadParams params() { return {.seed = 7, .scale = 1.0, .words_per_token = 0.7, .reps = 5, .cold_reps_long = 3}; }

// A workload entry of a results file: its name, arms and each step's session.
nlohmann::json entry_of(const Workload& w) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : w.steps) steps.push_back({{"arm", s.arm}, {"session", s.session}});
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& a : w.arms) arms.push_back({{"name", a.name}, {"cold", a.cold}, {"pinned", a.pinned}});
  return {{"name", w.name}, {"arms", arms}, {"steps", steps}, {"throughput", w.throughput}};
}

nlohmann::json answered(int step, const std::string& arm, int prompt, int evaluated, double ttft = 10) {
  return {{"step", step}, {"arm", arm}, {"ttft_ms", ttft}, {"prompt_tokens", prompt}, {"evaluated", evaluated},
          {"cached", prompt - evaluated}, {"completion_tokens", 1}};
}

std::map<std::string, Check::Verdict> verdicts(const std::vector<Check>& checks) {
  std::map<std::string, Check::Verdict> out;
  for (const auto& c : checks) out[c.name] = c.verdict;
  return out;
}

TEST(BenchCacheWorkloads, GrowAndThrashExtendEachSessionsPrompt) {
  const Workload grow = make_grow(params());
  ASSERT_EQ(grow.steps.size(), 8u);
  for (std::size_t i = 1; i < grow.steps.size(); ++i) {
    const auto& prev = grow.steps[i - 1].messages;
    const auto& next = grow.steps[i].messages;
    ASSERT_EQ(next.size(), prev.size() + 2u) << "a reply and a question";
    for (std::size_t m = 0; m < prev.size(); ++m) EXPECT_EQ(prev[m], next[m]);
  }
  const Workload thrash = make_thrash(params());
  ASSERT_EQ(thrash.steps.size(), 6u);
  EXPECT_EQ(thrash.parallel, 1);
  for (std::size_t s = 0; s < 3; ++s) {
    const auto& first = thrash.steps[s];
    const auto& second = thrash.steps[s + 3];
    EXPECT_EQ(first.session, second.session);
    EXPECT_EQ(first.arm, "round 1");
    EXPECT_EQ(second.arm, "round 2");
    ASSERT_EQ(second.messages.size(), first.messages.size() + 2u);
    for (std::size_t m = 0; m < first.messages.size(); ++m) EXPECT_EQ(first.messages[m], second.messages[m]);
  }
  EXPECT_NE(thrash.steps[0].messages[0], thrash.steps[1].messages[0]) << "distinct histories";
}

TEST(BenchCacheWorkloads, BurstSendsEveryRequestAtOnceAndUniqueSharesNothing) {
  const Workload burst = make_burst(params());
  EXPECT_EQ(burst.concurrency, static_cast<int>(burst.steps.size())) << "all in flight together";
  EXPECT_TRUE(burst.measure_sharing);
  for (const auto& s : burst.steps) {
    EXPECT_EQ(s.messages[0], burst.steps[0].messages[0]);
    EXPECT_FALSE(s.barrier);
    EXPECT_EQ(s.after, -1);
  }
  const Workload unique = make_unique(params());
  EXPECT_GT(unique.concurrency, 1);
  EXPECT_TRUE(unique.throughput);
  std::set<std::string> first_words;
  for (const auto& s : unique.steps) {
    ASSERT_FALSE(s.prompt.empty()) << "raw completions: no chat template in front";
    EXPECT_TRUE(s.messages.is_null() || s.messages.empty());
    first_words.insert(s.prompt.substr(0, s.prompt.find(' ')));
  }
  EXPECT_EQ(first_words.size(), unique.steps.size()) << "every prompt differs from its first word";
}

TEST(BenchChecks, ResendPassesOnlyWhenWarmIsOneTokenAndFast) {
  const Workload w = make_resend(params());
  const nlohmann::json entry = entry_of(w);
  auto record = [&](int warm_evaluated, double warm_ttft) {
    nlohmann::json requests = nlohmann::json::array();
    for (std::size_t i = 0; i < w.steps.size(); ++i) {
      const bool warm = w.steps[i].arm.starts_with("warm");
      requests.push_back(answered(static_cast<int>(i), w.steps[i].arm, 300, warm ? warm_evaluated : 300, warm ? warm_ttft : 1000));
    }
    return nlohmann::json{{"requests", requests}};
  };
  for (const auto& c : workload_checks(entry, record(1, 20))) EXPECT_EQ(c.verdict, Check::Verdict::pass) << c.name << c.detail;
  const auto slow = verdicts(workload_checks(entry, record(1, 200)));
  EXPECT_EQ(slow.at("warm TTFT <= cold ÷ 10 at 2048 tokens"), Check::Verdict::fail);
  const auto refed = verdicts(workload_checks(entry, record(40, 20)));
  EXPECT_EQ(refed.at("warm requests evaluate at most 1 prompt token"), Check::Verdict::fail);
}

TEST(BenchChecks, ThrashFailsWhenRoundTwoRefeedsTheHistory) {
  const Workload w = make_thrash(params());
  const nlohmann::json entry = entry_of(w);
  auto record = [](int round2_evaluated) {
    nlohmann::json requests = nlohmann::json::array();
    for (int s = 0; s < 3; ++s) requests.push_back(answered(s, "round 1", 300, 300));
    for (int s = 0; s < 3; ++s) requests.push_back(answered(3 + s, "round 2", 340, round2_evaluated));
    return nlohmann::json{{"requests", requests}};
  };
  EXPECT_TRUE(checks_passed(nlohmann::json::array({workload_checks(entry, record(40))[0].to_json(),
                                                    workload_checks(entry, record(40))[1].to_json()})));
  const auto thrashed = workload_checks(entry, record(340));
  for (const auto& c : thrashed) EXPECT_EQ(c.verdict, Check::Verdict::fail) << c.name;
}

TEST(BenchChecks, SharedAndBurstJudgeTheDistinctTokens) {
  const nlohmann::json stats = {{"kv_bytes_per_token", 100},
                                {"block_size", 16},
                                {"tiers", {{"device", {{"bytes", 0}, {"entries", 0}}}, {"host", {{"bytes", 0}, {"entries", 4}}}}}};
  nlohmann::json record = {{"requests", nlohmann::json::array({answered(0, "wave 1", 500, 500), answered(1, "wave 1", 500, 20)})},
                           {"sharing", {{"prompt_trie_tokens", 520}, {"cache_stats", stats}}}};
  const nlohmann::json shared = {{"name", "shared"}};
  // One copy: (520 distinct + 2 completions + 4 entries × 16) × 100 bytes = 58600.
  record["sharing"]["cache_stats"]["tiers"]["host"]["bytes"] = 58600;
  EXPECT_EQ(workload_checks(shared, record)[0].verdict, Check::Verdict::pass);
  record["sharing"]["cache_stats"]["tiers"]["host"]["bytes"] = 100000;  // a second copy of the prefix
  EXPECT_EQ(workload_checks(shared, record)[0].verdict, Check::Verdict::fail);
  record.erase("sharing");
  EXPECT_EQ(workload_checks(shared, record)[0].verdict, Check::Verdict::skip);

  const nlohmann::json burst = {{"name", "burst"}};
  nlohmann::json once = {{"requests", nlohmann::json::array({answered(0, "burst", 500, 500), answered(1, "burst", 500, 21)})},
                         {"sharing", {{"prompt_trie_tokens", 520}}}};
  EXPECT_EQ(workload_checks(burst, once)[0].verdict, Check::Verdict::pass);  // 521 <= 520 + 2
  once["requests"][1]["evaluated"] = 500;                                    // the prefix computed twice
  EXPECT_EQ(workload_checks(burst, once)[0].verdict, Check::Verdict::fail);
  EXPECT_TRUE(workload_checks({{"name", "agent"}}, once).empty()) << "compare-only workloads have no checks";
}

// Two targets, two interleaved repetitions: A's medians 10 and 30 ms, B's 20 ms both times.
nlohmann::json interleaved_results() {
  nlohmann::json a;
  nlohmann::json b;
  auto run = [](double ttft, int completion) {
    nlohmann::json r = answered(0, "unique", 100, 100, ttft);
    r["start_s"] = 0.0;
    r["total_ms"] = 1000.0;
    r["completion_tokens"] = completion;
    r["server_prompt_ms"] = 50.0;
    return nlohmann::json{{"target", "x"}, {"requests", {r}}, {"seconds", 2.0}, {"rss", {{0.5, 1024}}}, {"peak_rss_kb", 1024}};
  };
  merge_repetition(a, run(10, 40), 0);
  merge_repetition(b, run(20, 32), 0);
  merge_repetition(b, run(20, 32), 1);
  merge_repetition(a, run(30, 24), 1);
  const Workload w = make_unique(params());
  nlohmann::json entry = entry_of(w);
  entry["targets"] = {{"prefixd", a}, {"prefixd-nocache", b}};
  entry["reps"] = {{{"order", {"prefixd", "prefixd-nocache"}}}, {{"order", {"prefixd-nocache", "prefixd"}}}};
  entry["order"] = {"prefixd", "prefixd-nocache", "prefixd-nocache", "prefixd"};
  return {{"servers", {{{"name", "prefixd"}}, {{"name", "prefixd-nocache"}}}}, {"workloads", {entry}}};
}

TEST(BenchInterleave, MergedRepetitionsKeepTheirOwnMedians) {
  const auto results = interleaved_results();
  const auto& w = results["workloads"][0];
  const auto& a = w["targets"]["prefixd"];
  ASSERT_EQ(a["requests"].size(), 2u);
  EXPECT_EQ(a["requests"][1]["rep"], 1);
  EXPECT_DOUBLE_EQ(a["seconds"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(a["rss"][1][0].get<double>(), 2.5) << "the second run's samples follow the first's";
  EXPECT_EQ(repetitions(w), 2);
  EXPECT_EQ(per_rep_ttft_ratios(w, "prefixd", "prefixd-nocache"), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(spread_cell(per_rep_ttft_ratios(w, "prefixd", "prefixd-nocache")), "1.00× (0.50–1.50× over 2 repetitions)");
  // 40 and 24 generated tokens in one second against 32: 1.25 and 0.75.
  EXPECT_EQ(per_rep_throughput_ratios(w, "prefixd", "prefixd-nocache"), (std::vector<double>{1.25, 0.75}));
  const ArmStats s = arm_stats(a, "");
  EXPECT_DOUBLE_EQ(s.ttft_sum_ms, 40);
  EXPECT_EQ(prefill_cell(s), "0.50 ms") << "100 ms over 200 evaluated tokens";
}

TEST(BenchReport, InterleavedThroughputAndPerTokenCostAreReported) {
  const std::string md = render_report(interleaved_results(), {});
  EXPECT_TRUE(md.starts_with("# prefixd vs prefixd-nocache: ")) << md.substr(0, 100);
  EXPECT_NE(md.find("prefill ms/token prefixd"), std::string::npos);
  EXPECT_NE(md.find("TTFT Σ prefixd"), std::string::npos);
  EXPECT_NE(md.find("Interleaved: 2 repetitions"), std::string::npos);
  EXPECT_NE(md.find("| generated tokens/s"), std::string::npos);
  EXPECT_NE(md.find("1.00× (0.75–1.25× over 2 repetitions)"), std::string::npos) << md;
}

TEST(BenchReport, OneTargetHasNoRatioColumnsAndListsItsChecks) {
  auto results = interleaved_results();
  results["servers"] = {{{"name", "prefixd"}}};
  results["workloads"][0]["targets"].erase("prefixd-nocache");
  results["workloads"][0]["targets"]["prefixd"]["checks"] = {make_check("nothing is reused", false, "Σ cached 7").to_json()};
  const std::string md = render_report(results, {});
  EXPECT_TRUE(md.starts_with("# prefixd: "));
  EXPECT_EQ(md.find("÷ |"), std::string::npos) << md;
  EXPECT_NE(md.find("- FAIL nothing is reused — Σ cached 7"), std::string::npos);
}

TEST(BenchTargets, NamedPrefixdVariantsAddTheirFlags) {
  const TargetSources sources{.prefixd_bin = "/bin/prefixd", .prefixd_args = "--parallel-x 1", .baseline_args = "--foo 2"};
  const auto args = [](const Target& t) {
    std::string out;
    for (const auto& a : t.extra_args()) out += " " + a;
    return out;
  };
  EXPECT_EQ(args(make_target("prefixd", sources)), " --parallel-x 1");
  EXPECT_EQ(args(make_target("prefixd-nocache", sources)), " --parallel-x 1 --no-cache-prompt");
  EXPECT_EQ(make_target("prefixd-baseline", sources).name(), "prefixd-baseline");
  EXPECT_EQ(args(make_target("prefixd-baseline", sources)), " --parallel-x 1 --foo 2");
  EXPECT_THROW(make_target("vllm", sources), std::invalid_argument);
}

}  // namespace
}  // namespace prefixd::bench
