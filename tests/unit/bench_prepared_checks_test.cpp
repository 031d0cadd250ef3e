// The prepared workload's shape and its checks on made-up runs: the first request after a prepare
// passes only when it fed exactly prompt − chain tokens, later ones when they took at least the
// chain; one that fed its whole prompt (a server that ignored the prepared chain) fails.
#include <gtest/gtest.h>

#include "bench/checks.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

using nlohmann::json;

TEST(BenchPrepared, EachRepetitionPreparesOnceAndResetsBeforeEveryColdRequest) {
  const Workload w = make_prepared({.seed = 7, .scale = 1, .words_per_token = 0.7, .reps = 2});
  std::vector<std::string> arms;
  for (const auto& s : w.steps) {
    arms.push_back(s.arm);
    if (s.control.empty()) {
      EXPECT_TRUE(s.tools.is_array() && s.tools.size() >= 4) << "every first request carries the tool schema";
      EXPECT_EQ(s.messages.size(), 2u) << "system and the session's own message";
    }
  }
  const std::vector<std::string> cold = {"reset", "cold", "reset", "cold", "reset", "cold", "reset", "cold"};
  const std::vector<std::string> warm = {"reset", "prepare", "prepared", "prepared", "prepared", "prepared"};
  std::vector<std::string> expected = cold;
  expected.insert(expected.end(), warm.begin(), warm.end());
  expected.insert(expected.end(), warm.begin(), warm.end());
  expected.insert(expected.end(), cold.begin(), cold.end());
  EXPECT_EQ(arms, expected) << "the arms alternate their order";
  const Step& prepare = w.steps[9];
  ASSERT_EQ(prepare.control, "/v1/cache/prepare_modules");
  EXPECT_EQ(prepare.control_body["modules"][0]["system_prompt"], w.steps[10].messages[0]["content"]);
  EXPECT_EQ(prepare.control_body["modules"][1]["tools"], w.steps[10].tools);
  EXPECT_EQ(w.steps[static_cast<std::size_t>(w.gate_index())].arm, "prepared");
}

json workload_steps() {
  // reset, prepare, prepared (session 1), prepared (session 2), reset, cold (1), reset, cold (2)
  json steps = json::array();
  for (const auto& [arm, x] : std::vector<std::pair<std::string, double>>{
           {"reset", 0}, {"prepare", 0}, {"prepared", 1}, {"prepared", 2}, {"reset", 0}, {"cold", 1}, {"reset", 0}, {"cold", 2}}) {
    steps.push_back({{"arm", arm}, {"x", x}});
  }
  return {{"name", "prepared"}, {"steps", steps}};
}

// Session 1 feeds `first_fed` of its 1030 tokens, session 2 `second_fed` of its 1025; cold feeds all.
json run_with(std::int64_t first_fed, std::int64_t second_fed) {
  auto control = [](int step, const char* arm, json reply) {
    return json{{"step", step}, {"arm", arm}, {"control", "/v1/cache/x"}, {"status", 200}, {"reply", reply}};
  };
  auto request = [](int step, const char* arm, std::int64_t prompt, std::int64_t fed, double ttft) {
    return json{{"step", step}, {"arm", arm}, {"prompt_tokens", prompt}, {"fed_tokens", fed},
                {"cached", prompt - fed}, {"ttft_ms", ttft}};
  };
  return {{"control", json::array({control(0, "reset", json::object()),
                                   control(1, "prepare", {{"supported", true}, {"tokens", 1000}}),
                                   control(4, "reset", json::object()), control(6, "reset", json::object())})},
          {"requests", json::array({request(2, "prepared", 1030, first_fed, 20), request(3, "prepared", 1025, second_fed, 20),
                                    request(5, "cold", 1030, 1030, 200), request(7, "cold", 1025, 1025, 300)})}};
}

TEST(BenchPrepared, ChecksPassOnlyWhenThePreparedChainIsAllThatWasNotFed) {
  // Session 2 also took the 4-token user-turn opener session 1 left behind the chain.
  const auto exact = workload_checks(workload_steps(), run_with(30, 21));
  ASSERT_EQ(exact.size(), 5u);
  for (const auto& c : exact) EXPECT_EQ(c.verdict, Check::Verdict::pass) << c.name << ": " << c.detail;
  EXPECT_NE(exact[4].detail.find("12.5× (10.0–15.0×)"), std::string::npos) << exact[4].detail;

  const auto ignored = workload_checks(workload_steps(), run_with(1030, 1025));
  EXPECT_EQ(ignored[1].verdict, Check::Verdict::fail) << "the whole prompt fed again";
  EXPECT_EQ(ignored[2].verdict, Check::Verdict::fail);
  EXPECT_EQ(ignored[3].verdict, Check::Verdict::pass);
  const auto one_off = workload_checks(workload_steps(), run_with(31, 25));
  EXPECT_EQ(one_off[1].verdict, Check::Verdict::fail) << "token counts carry the claim: off by one fails";
  EXPECT_EQ(one_off[2].verdict, Check::Verdict::fail) << "a chain token was fed again";
  const auto later_short = workload_checks(workload_steps(), run_with(30, 26));
  EXPECT_EQ(later_short[1].verdict, Check::Verdict::pass);
  EXPECT_EQ(later_short[2].verdict, Check::Verdict::fail) << "session 2 re-fed a chain token";

  json failed_prepare = run_with(30, 25);
  failed_prepare["control"][1] = {{"step", 1}, {"arm", "prepare"}, {"control", "/v1/cache/prepare_modules"}, {"status", 404},
                                  {"error", "HTTP 404"}};
  const auto refused = workload_checks(workload_steps(), failed_prepare);
  EXPECT_EQ(refused[0].verdict, Check::Verdict::fail);
  EXPECT_EQ(refused[1].verdict, Check::Verdict::fail) << "no chain, nothing to take from the cache";
}

}  // namespace
}  // namespace prefixd::bench
