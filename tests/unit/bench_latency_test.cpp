// The public serving workloads, the concurrency sweep, and the latency numbers the report derives
// from a results file: arrivals, request shapes, percentiles, inter-token gaps. No model, no server.
#include <gtest/gtest.h>

#include <cmath>
#include <format>
#include <set>

#include "bench/plots.h"
#include "bench/report_latency.h"
#include "bench/request.h"
#include "bench/sse.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

WorkloadParams params(std::uint64_t seed = 7, double scale = 1.0) {
  return {.seed = seed, .scale = scale, .words_per_token = 0.7, .reps = 5, .cold_reps_long = 3};
}

// True when `longer` starts with every message of `shorter`.
bool extends(const nlohmann::json& longer, const nlohmann::json& shorter) {
  if (longer.size() <= shorter.size()) return false;
  for (std::size_t i = 0; i < shorter.size(); ++i) {
    if (longer[i] != shorter[i]) return false;
  }
  return true;
}

TEST(BenchArrivals, PoissonGapsHaveTheRatesMeanAndAreSeeded) {
  const auto a = poisson_arrivals(3, 20000, 4.0);
  ASSERT_EQ(a.size(), 20000u);
  EXPECT_EQ(a.front(), 0.0);
  for (std::size_t i = 1; i < a.size(); ++i) ASSERT_GT(a[i], a[i - 1]);
  // Mean gap 1/4 s; its standard error over 19,999 gaps is 0.25 / sqrt(19999) ≈ 0.0018.
  EXPECT_NEAR(a.back() / 19999.0, 0.25, 0.01);
  // Exponential gaps: about e^-1 of them exceed the mean.
  int above = 0;
  for (std::size_t i = 1; i < a.size(); ++i) above += (a[i] - a[i - 1]) > 0.25 ? 1 : 0;
  EXPECT_NEAR(above / 19999.0, std::exp(-1.0), 0.02);
  EXPECT_EQ(poisson_arrivals(3, 50, 4.0), poisson_arrivals(3, 50, 4.0));
  EXPECT_NE(poisson_arrivals(3, 50, 4.0), poisson_arrivals(4, 50, 4.0));
  EXPECT_THROW(poisson_arrivals(3, 5, 0.0), std::invalid_argument);
}

TEST(BenchPublicWorkloads, GeneratedSharedPrefixGroupsShareTheirSystemPromptAndArriveOpenLoop) {
  const Workload w = make_workload("gsp", params());
  ASSERT_EQ(w.steps.size(), 32u);
  EXPECT_TRUE(w.latency);
  EXPECT_EQ(w.concurrency, 32) << "every request may be in flight: arrivals never wait for a worker";
  std::map<std::string, std::vector<const Step*>> groups;
  double previous = -1;
  for (const auto& s : w.steps) {
    EXPECT_GT(s.arrival_s, previous);
    previous = s.arrival_s;
    EXPECT_EQ(s.after, -1);
    EXPECT_EQ(s.body_fields.value("ignore_eos", false), true);
    EXPECT_FALSE(s.prompt.empty());
    groups[s.session.substr(0, s.session.find("-prompt"))].push_back(&s);
  }
  ASSERT_EQ(groups.size(), 4u);
  std::set<std::string> systems;
  for (const auto& [group, steps] : groups) {
    ASSERT_EQ(steps.size(), 8u) << group;
    EXPECT_EQ(steps.front()->arm, "first of its group") << group;
    const std::string system = steps.front()->prompt.substr(0, steps.front()->prompt.find("\n\n"));
    systems.insert(system);
    std::set<std::string> prompts;
    for (const auto* s : steps) {
      EXPECT_TRUE(s->prompt.starts_with(system + "\n\n")) << group;
      if (s != steps.front()) {
        EXPECT_EQ(s->arm, "rest of its group");
      }
      prompts.insert(s->prompt);
    }
    EXPECT_EQ(prompts.size(), 8u) << "every question differs";
  }
  EXPECT_EQ(systems.size(), 4u);
  // Shuffled: the first eight requests are not one group's.
  std::set<std::string> first_eight;
  for (std::size_t i = 0; i < 8; ++i) first_eight.insert(w.steps[i].session.substr(0, w.steps[i].session.find("-prompt")));
  EXPECT_GT(first_eight.size(), 1u);
}

TEST(BenchPublicWorkloads, MultiRoundQaUsersWaitForTheirAnswersAndGrowTheirHistory) {
  const Workload w = make_workload("mqa", params());
  ASSERT_EQ(w.steps.size(), 16u);
  EXPECT_LT(w.parallel, 4) << "more users than slots";
  std::map<std::string, int> last;
  for (std::size_t i = 0; i < w.steps.size(); ++i) {
    const Step& s = w.steps[i];
    EXPECT_GE(s.arrival_s, 0);
    const auto it = last.find(s.session);
    if (it == last.end()) {
      EXPECT_EQ(s.arm, "first round");
      EXPECT_EQ(s.after, -1);
      EXPECT_EQ(s.messages.size(), 2u);
    } else {
      EXPECT_EQ(s.arm, "later rounds");
      EXPECT_EQ(s.after, it->second);
      const Step& before = w.steps[static_cast<std::size_t>(it->second)];
      EXPECT_TRUE(extends(s.messages, before.messages)) << i;
      EXPECT_EQ(s.messages.size(), before.messages.size() + 2);
      EXPECT_GT(s.arrival_s, before.arrival_s);
    }
    last[s.session] = static_cast<int>(i);
  }
  EXPECT_EQ(last.size(), 4u);
  // Every user's history opens with the same system prompt.
  EXPECT_EQ(w.steps[0].messages[0], w.steps[1].messages[0]);
  EXPECT_NE(w.steps[0].messages[1], w.steps[1].messages[1]);
}

TEST(BenchPublicWorkloads, MultiTurnClientsCycleThroughTheirConversationsOneRequestAtATime) {
  const Workload w = make_workload("multiturn", params());
  EXPECT_EQ(w.concurrency, 2);
  std::map<std::string, const Step*> latest;  // per conversation
  std::map<std::string, std::set<int>> owners;
  for (std::size_t i = 0; i < w.steps.size(); ++i) {
    const Step& s = w.steps[i];
    EXPECT_EQ(s.arrival_s, -1) << "closed loop";
    if (i >= 2) {
      EXPECT_EQ(s.after, static_cast<int>(i) - 2) << "each client waits for its own previous request";
    }
    owners[s.session].insert(static_cast<int>(i % 2));
    if (const auto it = latest.find(s.session); it != latest.end()) {
      EXPECT_EQ(s.arm, "later turns");
      EXPECT_TRUE(extends(s.messages, it->second->messages));
    } else {
      EXPECT_EQ(s.arm, "first turn");
    }
    latest[s.session] = &s;
  }
  EXPECT_EQ(latest.size(), 6u);
  const std::string common = w.steps[0].messages[0]["content"].get<std::string>().substr(0, 200);
  for (const auto& [session, step] : latest) {
    EXPECT_TRUE(step->messages[0]["content"].get<std::string>().starts_with(common)) << "the prefix common to all";
  }
}

TEST(BenchPublicWorkloads, SweepPointsHaveAsManySlotsAsClientsAndExpandFromOneName) {
  const auto names = expand_workload_names({"resend", "sweep"});
  ASSERT_EQ(names.size(), 7u);
  EXPECT_EQ(names[1], "sweep-1");
  EXPECT_EQ(names.back(), "sweep-32");
  for (const int clients : sweep_client_counts()) {
    const Workload w = make_workload(sweep_workload_name(clients), params());
    EXPECT_EQ(w.clients, clients);
    EXPECT_EQ(w.parallel, clients);
    EXPECT_EQ(w.concurrency, clients);
    ASSERT_EQ(w.steps.size(), static_cast<std::size_t>(3 * clients));
    for (std::size_t i = 0; i < w.steps.size(); ++i) {
      const Step& s = w.steps[i];
      EXPECT_EQ(s.after, i < static_cast<std::size_t>(clients) ? -1 : static_cast<int>(i) - clients);
      EXPECT_EQ(s.messages[0], w.steps[0].messages[0]) << "one system prompt shared by all";
    }
  }
  EXPECT_THROW(make_workload("sweep-3", params()), std::invalid_argument);
}

TEST(BenchLatency, StreamPiecesGiveTheInterTokenGaps) {
  StreamReader reader;
  reader.feed("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n");
  EXPECT_EQ(reader.pieces(), 0) << "the role chunk is not a token";
  reader.feed("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n");
  EXPECT_EQ(reader.pieces(), 2);
  reader.feed("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n");
  EXPECT_EQ(reader.pieces(), 2) << "a finish chunk is not a token";

  CompletionResult r;
  r.piece_ms = {100.0, 112.5, 112.5, 130.004};
  const auto record = request_record(0, "arm", 0.0, r);
  EXPECT_EQ(record.at("itl_ms"), nlohmann::json({12.5, 0.0, 17.5}));
  r.piece_ms = {100.0};
  EXPECT_FALSE(request_record(0, "arm", 0.0, r).contains("itl_ms"));
}

TEST(BenchLatency, PercentilesByNearestRank) {
  EXPECT_FALSE(percentile({}, 0.5));
  EXPECT_EQ(*percentile({5}, 0.99), 5);
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  EXPECT_EQ(*percentile(hundred, 0.50), 50);
  EXPECT_EQ(*percentile(hundred, 0.99), 99);
  EXPECT_EQ(*percentile(hundred, 1.0), 100);
  EXPECT_EQ(*percentile({1, 2, 3}, 0.99), 3);
}

// A request record of a results file.
nlohmann::json request(int rep, double start_s, double ttft_ms, double total_ms, int tokens, std::vector<double> itl) {
  return {{"rep", rep},        {"start_s", start_s},         {"ttft_ms", ttft_ms},
          {"total_ms", total_ms}, {"completion_tokens", tokens}, {"itl_ms", itl}};
}

nlohmann::json sweep_results() {
  auto point = [](int clients, double ours_ttft, double peer_ttft, double ours_total_ms, double peer_total_ms) {
    nlohmann::json w = {{"name", sweep_workload_name(clients)}, {"clients", clients}, {"latency", true},
                        {"reps", nlohmann::json::array({nlohmann::json::object(), nlohmann::json::object()})}};
    nlohmann::json ours = nlohmann::json::array(), peer = nlohmann::json::array();
    for (int rep = 0; rep < 2; ++rep) {
      for (int c = 0; c < clients; ++c) {
        ours.push_back(request(rep, 0.0, ours_ttft, ours_total_ms, 10, {10, 20}));
        peer.push_back(request(rep, 0.0, peer_ttft, peer_total_ms, 10, {15, 25}));
      }
    }
    w["targets"]["prefixd"]["requests"] = std::move(ours);
    w["targets"]["llama-server"]["requests"] = std::move(peer);
    return w;
  };
  return {{"servers", {{{"name", "prefixd"}}, {{"name", "llama-server"}}}},
          {"workloads", {point(1, 100, 200, 1000, 1000), point(2, 300, 200, 1000, 2000)}}};
}

TEST(BenchLatency, LatencyOfARepetitionAndTheSweepVerdicts) {
  nlohmann::json record = {{"requests",
                            {request(0, 1.0, 100, 1000, 10, {10, 30}), request(0, 1.5, 300, 1500, 20, {20}),
                             {{"rep", 0}, {"error", "boom"}}, request(1, 0.0, 999, 999, 1, {})}}};
  const auto l = latency_of(record, 0);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->requests, 2);
  EXPECT_EQ(l->errors, 1);
  EXPECT_EQ(l->ttft_p50_ms, 100);
  EXPECT_EQ(l->ttft_p99_ms, 300);
  EXPECT_EQ(*l->itl_p50_ms, 20);
  EXPECT_EQ(*l->itl_p99_ms, 30);
  EXPECT_DOUBLE_EQ(l->output_per_s, 30.0 / 2.0);  // 1.0 s → 3.0 s
  EXPECT_FALSE(latency_of(record, 2));

  const nlohmann::json results = sweep_results();
  const std::string section = sweep_section(results, {});
  EXPECT_NE(section.find("Concurrency sweep"), std::string::npos);
  // At 2 clients prefixd's TTFT p99 is 1.5× the peer's: the verdict names that point; its
  // throughput is 2× there and equal at 1 client, so that bar passes.
  EXPECT_NE(section.find("MISS TTFT p99 of prefixd ≤ llama-server's at every point (median of the per-repetition ratios); "
                         "not at 2 client(s)"),
            std::string::npos)
      << section;
  EXPECT_NE(section.find("PASS output tokens/s of prefixd ≥ 0.95× llama-server's at every point"), std::string::npos) << section;
  EXPECT_EQ(sweep_section({{"workloads", nlohmann::json::array()}}, {}), "");

  const PlotSet plots = build_plots(results, "/data", "/png", "stem");
  ASSERT_TRUE(plots.data.contains("sweep.dat"));
  EXPECT_EQ(plots.data.at("sweep.dat"),
            "# clients, then per server: ttft_p99_ms output_tokens_per_s (medians over repetitions)\n"
            "1 100 10 200 10\n2 300 20 200 10\n");
  EXPECT_NE(plots.script.find("stem-sweep.png"), std::string::npos);
}

}  // namespace
}  // namespace prefixd::bench
