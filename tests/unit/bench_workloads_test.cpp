// The pure parts of the benchmark component: workload generators, the ratio rule, statistics from
// a results file, the report, the plots script, small parsers. No model, no server.
#include <gtest/gtest.h>

#include <set>

#include "bench/gates.h"
#include "bench/plots.h"
#include "bench/report.h"
#include "bench/request.h"
#include "bench/rss.h"
#include "bench/report_stats.h"
#include "bench/target.h"
#include "bench/text.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

WorkloadParams params(std::uint64_t seed = 7, double scale = 1.0) {
  return {.seed = seed, .scale = scale, .words_per_token = 0.7, .reps = 5, .cold_reps_long = 3};
}

std::string dump(const Workload& w) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : w.steps) {
    j.push_back({s.arm, s.session, s.messages, s.prompt, s.max_tokens, s.after, s.barrier, s.restart_before});
  }
  return j.dump();
}

TEST(BenchWorkloads, SameSeedSameBytesOtherSeedOtherBytes) {
  for (const auto& name : workload_names()) {
    const Workload a = make_workload(name, params(7));
    const Workload b = make_workload(name, params(7));
    const Workload c = make_workload(name, params(8));
    EXPECT_EQ(dump(a), dump(b)) << name;
    EXPECT_NE(dump(a), dump(c)) << name;
    EXPECT_FALSE(a.steps.empty()) << name;
    EXPECT_GE(a.ctx_size, 4096) << name;
    EXPECT_EQ(a.ctx_size % 256, 0) << name;
    for (const auto& s : a.steps) EXPECT_NE(a.arm(s.arm), nullptr) << name << ": step arm " << s.arm << " is not a row";
  }
  EXPECT_THROW(make_workload("nope", params()), std::invalid_argument);
}

TEST(BenchWorkloads, ContextFitsTheLongestPromptInEverySlot) {
  for (const auto& name : workload_names()) {
    const Workload w = make_workload(name, params(3, 2.0));
    int longest = 0;
    for (const auto& s : w.steps) longest = std::max(longest, s.planned_tokens + s.max_tokens);
    EXPECT_GE(w.ctx_size / std::max(1, w.parallel), longest) << name;
    EXPECT_GE(w.ctx_size, 2 * longest) << name;
  }
}

TEST(BenchWorkloads, ResendFollowsTheProtocol) {
  const Workload w = make_resend(params());
  std::map<std::string, int> count;
  for (const auto& s : w.steps) {
    ++count[s.arm];
    EXPECT_EQ(s.max_tokens, 1) << "prefill probes pin the output";
  }
  EXPECT_EQ(count["cold 256"], 5);
  EXPECT_EQ(count["cold 512"], 5);
  EXPECT_EQ(count["cold 1024"], 3);
  EXPECT_EQ(count["cold 2048"], 3);
  EXPECT_EQ(count["warm 2048"], 5);
  // BENCH_SCALE=4 gives the issue's ladder.
  const Workload big = make_resend(params(7, 4.0));
  std::set<std::string> arms;
  for (const auto& a : big.arms) arms.insert(a.name);
  EXPECT_TRUE(arms.contains("cold 8192") && arms.contains("warm 1024"));
  // Every cold repetition is a different prompt; the warm arm repeats the last cold one.
  std::set<std::string> cold_prompts;
  for (const auto& s : w.steps) {
    if (s.arm == "cold 256") cold_prompts.insert(s.messages.dump());
  }
  EXPECT_EQ(cold_prompts.size(), 5u);
  EXPECT_EQ(w.steps.back().arm, "warm 256");
  EXPECT_TRUE(cold_prompts.contains(w.steps.back().messages.dump()));
}

TEST(BenchWorkloads, AgentTurnsExtendTheirTranscript) {
  const Workload w = make_agent(params());
  ASSERT_EQ(w.steps.size(), 50u);  // 5 runs of 10 turns
  for (std::size_t i = 1; i < 10; ++i) {
    const auto& prev = w.steps[i - 1].messages;
    const auto& next = w.steps[i].messages;
    ASSERT_EQ(next.size(), prev.size() + 2u) << "a tool call and its result";
    for (std::size_t m = 0; m < prev.size(); ++m) EXPECT_EQ(prev[m], next[m]) << "turn " << i + 1 << " rewrote message " << m;
  }
  EXPECT_EQ(w.steps[0].messages[0], w.steps[10].messages[0]) << "all runs share the system prompt";
}

TEST(BenchWorkloads, MultiSessionInterleavesSixteenSessionsInOrder) {
  const Workload w = make_multisession(params());
  EXPECT_EQ(w.parallel, 2);
  std::map<std::string, int> turns;
  std::map<std::string, int> first;
  std::map<std::string, int> last;
  for (std::size_t i = 0; i < w.steps.size(); ++i) {
    const auto& s = w.steps[i];
    const int seen = turns[s.session]++;
    // Turn k sends system + k earlier pairs + the question; it waits for the session's previous turn.
    EXPECT_EQ(s.messages.size(), 2u + 2u * static_cast<std::size_t>(seen));
    EXPECT_EQ(s.after, seen == 0 ? -1 : last[s.session]);
    if (seen == 0) first[s.session] = static_cast<int>(i);
    last[s.session] = static_cast<int>(i);
    EXPECT_EQ(s.messages[0], w.steps[0].messages[0]) << "one shared system prompt";
  }
  bool interleaved = false;  // some session's turns are not next to each other
  for (const auto& [session, n] : turns) interleaved = interleaved || last[session] - first[session] + 1 > n;
  EXPECT_EQ(turns.size(), 16u);
  for (const auto& [session, n] : turns) {
    EXPECT_GE(n, 4) << session;
    EXPECT_LE(n, 8) << session;
  }
  EXPECT_TRUE(interleaved);
}

TEST(BenchWorkloads, SharedSendsWavesOfEight) {
  const Workload w = make_shared(params());
  ASSERT_EQ(w.steps.size(), 32u);
  EXPECT_EQ(w.parallel, 4);
  EXPECT_EQ(w.concurrency, 8);
  std::set<std::string> questions;
  for (std::size_t i = 0; i < w.steps.size(); ++i) {
    EXPECT_EQ(w.steps[i].barrier, i > 0 && i % 8 == 0) << i;
    EXPECT_EQ(w.steps[i].messages[0], w.steps[0].messages[0]);
    questions.insert(w.steps[i].messages[1].dump());
  }
  EXPECT_EQ(questions.size(), 32u);
}

TEST(BenchWorkloads, EditBranchesAtTheThirdTurn) {
  const Workload w = make_edit(params());
  ASSERT_EQ(w.steps.size(), 5u * 9u);
  const auto& turn3 = w.steps[2].messages;  // system, u1, a1, u2, a2, u3
  const auto& edit = w.steps[6].messages;
  ASSERT_EQ(w.steps[6].arm, "edit turn 3");
  ASSERT_EQ(edit.size(), turn3.size());
  for (std::size_t m = 0; m + 1 < edit.size(); ++m) EXPECT_EQ(edit[m], turn3[m]);
  EXPECT_NE(edit.back(), turn3.back());
  const std::string original = turn3.back().at("content");
  const std::string edited = edit.back().at("content");
  EXPECT_EQ(original.substr(0, 3), edited.substr(0, 3)) << "the edit keeps the start of the question";
  EXPECT_EQ(w.steps[7].messages, edit) << "regenerate sends the edited request again";
  EXPECT_EQ(w.steps[8].messages, w.steps[5].messages) << "back to the original branch's last turn";
}

TEST(BenchWorkloads, RestartArms) {
  const Workload w = make_restart(params());
  int restarts = 0;
  for (const auto& s : w.steps) {
    restarts += s.restart_before;
    EXPECT_EQ(s.restart_before, s.arm == "after restart");
    EXPECT_EQ(s.messages, w.steps[0].messages);
  }
  EXPECT_EQ(restarts, 5);
  EXPECT_EQ(w.concurrency, 1);
}

TEST(BenchText, LengthsAreSeededAndClipped) {
  bench::SeededRng a(5);
  bench::SeededRng b(5);
  const LogNormal shape{.median = 40, .sigma = 1.0, .lo = 8, .hi = 100};
  std::vector<int> draws;
  for (int i = 0; i < 2000; ++i) {
    const int x = draw_length(a, shape, 1.0);
    EXPECT_EQ(x, draw_length(b, shape, 1.0));
    EXPECT_GE(x, 8);
    EXPECT_LE(x, 100);
    draws.push_back(x);
  }
  std::ranges::sort(draws);
  EXPECT_NEAR(draws[1000], 40, 4) << "the median is the log-normal's";
  EXPECT_EQ(scaled(100, 0.25), 25);
  EXPECT_EQ(scaled(10, 0.01, 4), 4);
  EXPECT_NE(derive_seed(1, 2, 3), derive_seed(1, 3, 2));
  EXPECT_EQ(text_of(9, 100, 0.5), bench::make_text(9, 50));
}

TEST(BenchStats, TightnessAndTheRatioRule) {
  EXPECT_TRUE(is_tight(bench::summarize({100, 140, 149})));
  EXPECT_FALSE(is_tight(bench::summarize({100, 151})));
  EXPECT_TRUE(is_tight(bench::summarize({})));
  EXPECT_DOUBLE_EQ(spread(bench::summarize({100, 250})), 2.5);
  EXPECT_DOUBLE_EQ(spread(bench::summarize({100})), 1.0);
  const auto p = bench::summarize({10, 20, 30});   // median 20
  const auto l = bench::summarize({40, 80, 100});  // median 80
  EXPECT_EQ(ratio_cell(p, l, 1.0), "0.25×");
  EXPECT_EQ(ratio_cell(p, l, 1.5), "0.25×");
  EXPECT_EQ(ratio_cell(p, l, 2.0), "0.12–0.50×");  // 0.25 ÷ 2 to 0.25 × 2
  EXPECT_EQ(ratio_cell(p, bench::summarize({}), 1.0), "n/a");
  EXPECT_EQ(count_ratio_cell(50, 200), "0.25×");
  EXPECT_EQ(count_ratio_cell(5, 0), "n/a");
  EXPECT_EQ(percent_cell(87, 100), "87%");
  EXPECT_EQ(percent_cell(1, 0), "n/a");
}

// A results file as `prefixd compare` writes it, small enough to check by hand.
nlohmann::json request(int step, const std::string& arm, double ttft, int prompt, int evaluated, int completion = 1) {
  return {{"step", step}, {"arm", arm}, {"start_s", step * 1.0}, {"ttft_ms", ttft}, {"prompt_tokens", prompt},
          {"evaluated", evaluated}, {"cached", prompt - evaluated}, {"completion_tokens", completion},
          {"first_piece", " a"}};
}

nlohmann::json gates(bool pass) {
  return {{"logprobs", false},
          {"first_token", {{"warm", " a"}, {"cold", " a"}, {"workload", " a"}, {"equal", pass}, {"workload_equal", true},
                           {"warm_evaluated", 1}, {"cold_evaluated", 100}, {"logprob_max_abs_diff", nullptr}}},
          {"determinism", {{"equal", true}}},
          {"context", {{"differs", true}, {"first_token_differs", true}, {"logprob_max_abs_diff", nullptr}}}};
}

nlohmann::json sample_results(double cold_spread) {
  const nlohmann::json p = {{"target", "prefixd"},
                            {"requests", {request(0, "cold 100", 1000, 100, 100), request(1, "cold 100", 1000 * cold_spread, 100, 100),
                                          request(2, "warm 100", 10, 100, 1), request(3, "warm 100", 12, 100, 1)}},
                            {"peak_rss_kb", 2048},
                            {"rss", {{0.0, 1024}, {1.0, 2048}}},
                            {"counter", {{"metric", "prefixd_prompt_tokens_fed_total"}, {"evaluated", 202}}},
                            {"gates", gates(true)}};
  const nlohmann::json l = {{"target", "llama-server"},
                            {"requests", {request(0, "cold 100", 900, 100, 100), request(1, "cold 100", 950, 100, 100),
                                          request(2, "warm 100", 20, 100, 1), request(3, "warm 100", 20, 100, 100)}},
                            {"peak_rss_kb", 4096},
                            {"gates", gates(false)}};
  return {{"date", "2024-06-01"},
          {"machine", {{"hostname", "box"}, {"cpus", 2}}},
          {"options", {{"model", "m.gguf"}, {"scale", 1.0}, {"cache_mib", 64}, {"threads", 2}}},
          {"servers", {{{"name", "prefixd"}, {"version", "prefixd 0.1.0"}}, {{"name", "llama-server"}, {"version", "v"}}}},
          {"workloads",
           {{{"name", "resend"},
             {"title", "Identical resend"},
             {"description", "probe"},
             {"arms", {{{"name", "cold 100"}, {"cold", true}, {"pinned", true}}, {{"name", "warm 100"}, {"cold", false}, {"pinned", true}}}},
             {"order", {"prefixd", "llama-server"}},
             {"targets", {{"prefixd", p}, {"llama-server", l}}}}}},
          {"plots", {{{"file", "x-ttft-vs-length.png"}, {"title", "TTFT"}, {"workload", "resend"}}}}};
}

TEST(BenchStats, ArmStatsFromAResultsFile) {
  const auto results = sample_results(1.2);
  const auto& p = results["workloads"][0]["targets"]["prefixd"];
  const ArmStats warm = arm_stats(p, "warm 100");
  EXPECT_EQ(warm.n, 2);
  EXPECT_EQ(warm.evaluated_sum, 2);
  EXPECT_EQ(warm.cached_sum, 198);
  EXPECT_DOUBLE_EQ(warm.ttft_ms.median, 11);
  const ArmStats all = arm_stats(p, "");
  EXPECT_EQ(all.n, 4);
  EXPECT_EQ(all.evaluated_sum, 202);
  // The worst cold arm: prefixd's 1000 and 1200 ms.
  EXPECT_DOUBLE_EQ(workload_noise(results, results["workloads"][0]), 1.2);
  const auto loose = sample_results(2.0);
  EXPECT_DOUBLE_EQ(workload_noise(loose, loose["workloads"][0]), 2.0);
  // A workload without a repeated cold arm borrows the run's worst.
  nlohmann::json other = {{"name", "x"}, {"arms", nlohmann::json::array()}, {"targets", nlohmann::json::object()}};
  EXPECT_DOUBLE_EQ(workload_noise(loose, other), 2.0);
  EXPECT_DOUBLE_EQ(workload_noise(nlohmann::json::object(), other), 1.0);
}

TEST(BenchReport, RendersOneTablePerWorkloadWithRatiosAndGates) {
  const std::string md = render_report(sample_results(1.2), {.image_prefix = "../bench/results/", .heading_level = 1});
  EXPECT_TRUE(md.starts_with("# prefixd vs llama-server: 2024-06-01, box\n")) << md.substr(0, 200);
  EXPECT_NE(md.find("## Summary"), std::string::npos);
  EXPECT_NE(md.find("## Identical resend (`resend`)"), std::string::npos);
  // warm: prefixd 11 ms vs llama-server 20 ms → 0.55× as a point (cold arms tight); evaluated 2 vs 101.
  EXPECT_NE(md.find("| warm 100 "), std::string::npos);
  EXPECT_NE(md.find("0.55×"), std::string::npos);
  EXPECT_NE(md.find("0.02×"), std::string::npos);
  EXPECT_NE(md.find("--cache-ram 64"), std::string::npos);
  EXPECT_NE(md.find("--prompt-cache-capacity-bytes 67108864"), std::string::npos);
  EXPECT_NE(md.find("2 MiB"), std::string::npos);  // peak RSS of prefixd
  EXPECT_NE(md.find("![TTFT](../bench/results/x-ttft-vs-length.png)"), std::string::npos);
  EXPECT_NE(md.find("✗ warm"), std::string::npos) << "llama-server's failed first-token gate shows";
  // Loose cold arms turn the TTFT ratio into a range.
  const std::string loose = render_report(sample_results(2.0), {});
  EXPECT_NE(loose.find("0.28–1.10×"), std::string::npos) << loose;  // warm 0.55× ÷ and × 2
  // Embedded under a docs heading, the levels shift down by one.
  const std::string embedded = render_report(sample_results(1.2), {.image_prefix = "", .heading_level = 2});
  EXPECT_TRUE(embedded.starts_with("## prefixd vs llama-server"));
  EXPECT_NE(embedded.find("### Summary"), std::string::npos);
}

TEST(BenchReport, SpliceKeepsTheHandWrittenPage) {
  const std::string page = std::string("# Benchmarks\n\nintro\n\n") + kReportBegin + "\nold\n" + kReportEnd + "\n\ntail\n";
  const std::string out = splice_report(page, "NEW");
  EXPECT_NE(out.find("intro"), std::string::npos);
  EXPECT_NE(out.find("tail"), std::string::npos);
  EXPECT_NE(out.find("NEW"), std::string::npos);
  EXPECT_EQ(out.find("old"), std::string::npos);
  EXPECT_EQ(splice_report(out, "NEW"), out) << "idempotent";
  const std::string fresh = splice_report("# B\n", "R");
  EXPECT_NE(fresh.find(kReportBegin), std::string::npos);
  EXPECT_NE(fresh.find("R\n"), std::string::npos);
}

TEST(BenchPlots, ScriptHasEveryPlotAndPicksATerminal) {
  const PlotSet set = build_plots(sample_results(1.2), "/d", "/p", "run");
  EXPECT_NE(set.script.find("pngcairo"), std::string::npos);
  EXPECT_NE(set.script.find("set output \"/p/run-ttft-vs-length.png\""), std::string::npos);
  EXPECT_NE(set.script.find("/p/run-rss.png"), std::string::npos);
  ASSERT_TRUE(set.data.contains("ttft-vs-length.dat"));
  // One row for length 100: prompt tokens, prefixd cold/warm, llama-server cold/warm medians.
  EXPECT_NE(set.data.at("ttft-vs-length.dat").find("\n100 1100 11 925 20\n"), std::string::npos)
      << set.data.at("ttft-vs-length.dat");
  EXPECT_TRUE(set.data.contains("rss-resend-prefixd.dat"));
  EXPECT_EQ(set.plots.size(), 2u);
}

TEST(BenchParsing, ProcStatusAndPrometheus) {
  const ProcMemory m = parse_proc_status("Name:\tx\nVmHWM:\t  123456 kB\nVmRSS:\t   2345 kB\n");
  EXPECT_EQ(m.hwm_kb, 123456);
  EXPECT_EQ(m.rss_kb, 2345);
  EXPECT_EQ(parse_proc_status("").rss_kb, -1);
  const std::string text =
      "# HELP llamacpp:prompt_tokens_total x\nllamacpp:prompt_tokens_total 15\nllamacpp:prompt_tokens_total_x 99\n"
      "prefixd_prompt_tokens_fed_total{a=\"1\"} 10\nprefixd_prompt_tokens_fed_total{a=\"2\"} 5\n";
  EXPECT_DOUBLE_EQ(prometheus_value(text, "llamacpp:prompt_tokens_total"), 15);
  EXPECT_DOUBLE_EQ(prometheus_value(text, "prefixd_prompt_tokens_fed_total"), 15);
  EXPECT_DOUBLE_EQ(prometheus_value(text, "missing_total"), -1);
}

TEST(BenchGates, LogprobDifferenceOverSharedTokens) {
  const nlohmann::json a = {{{"id", 1}, {"token", "x"}, {"logprob", -1.0}}, {{"id", 2}, {"token", "y"}, {"logprob", -2.0}}};
  const nlohmann::json b = {{{"id", 2}, {"token", "y"}, {"logprob", -2.5}}, {{"id", 3}, {"token", "z"}, {"logprob", -0.1}}};
  EXPECT_DOUBLE_EQ(*logprob_max_abs_diff(a, b), 0.5);
  EXPECT_FALSE(logprob_max_abs_diff(a, nlohmann::json()).has_value());
  EXPECT_FALSE(logprob_max_abs_diff(a, nlohmann::json::array({{{"id", 9}, {"logprob", 0.0}}})).has_value());
  EXPECT_TRUE(gates_passed(gates(true)));
  EXPECT_FALSE(gates_passed(gates(false)));
}

TEST(BenchRequest, BodyAndCounters) {
  const auto body = chat_body(nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}}),
                              {.max_tokens = 1, .session = "s", .cache_prompt = false, .top_logprobs = 5});
  EXPECT_EQ(body["temperature"], 0);
  EXPECT_EQ(body["prompt_cache_key"], "s");
  EXPECT_EQ(body["cache_prompt"], false);
  EXPECT_EQ(body["top_logprobs"], 5);
  EXPECT_TRUE(body["stream_options"]["include_usage"].get<bool>());
  bench::CompletionResult r;
  r.prompt_tokens = 100;
  r.prompt_n = 3;
  EXPECT_EQ(evaluated_tokens(r), 3);
  EXPECT_EQ(cached_tokens(r), 97);
  r.cache_n = 90;
  EXPECT_EQ(cached_tokens(r), 90);
  r.cached_tokens = 96;
  EXPECT_EQ(cached_tokens(r), 96);
}

TEST(BenchTarget, EquivalentFlagsForBothServers) {
  const ServerSettings s{.model_path = "m.gguf", .ctx_size = 8192, .parallel = 4, .threads = 2, .cache_mib = 512};
  const auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& a : v) out += " " + a;
    return out;
  };
  const std::string p = join(Target(TargetKind::prefixd, "prefixd", "/bin/prefixd", {}).arguments(s, 9000));
  const std::string l = join(Target(TargetKind::llama_server, "llama-server", "/usr/bin/llama-server", {"--cache-reuse", "256"}).arguments(s, 9001));
  EXPECT_NE(p.find(" --ctx-size 8192 --parallel 4 --threads 2 --prompt-cache-capacity-bytes 536870912"), std::string::npos) << p;
  EXPECT_NE(l.find(" -c 8192 -np 4 -t 2 --cache-ram 512"), std::string::npos) << l;
  EXPECT_NE(l.find(" --metrics"), std::string::npos);
  EXPECT_TRUE(l.ends_with(" --cache-reuse 256"));
}

}  // namespace
}  // namespace prefixd::bench
