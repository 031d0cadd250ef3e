// The prepared workload's checks: after POST /v1/cache/prepare_modules the first session's first
// request feeds exactly its own message (fed = prompt − the chain's tokens, as the server counts
// them); later sessions take the whole chain too, and also the user-turn opener the first one left
// behind it (the same few tokens each time); the cold arm feeds everything; and (a goal) the
// prepared first requests answer sooner.
#include <algorithm>
#include <cstdint>
#include <format>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "bench/checks.h"
#include "bench/report_disk.h"
#include "bench/report_stats.h"
#include "bench/stats.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

std::int64_t count_of(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<std::int64_t>() : -1;
}

// Requests and control answers together, in the order they were sent.
std::vector<nlohmann::json> in_order(const nlohmann::json& record) {
  std::vector<nlohmann::json> all;
  for (const auto& r : list_at(record, "requests")) all.push_back(r);
  for (const auto& c : list_at(record, "control")) all.push_back(c);
  std::ranges::stable_sort(all, {}, [](const nlohmann::json& r) { return std::pair(r.value("rep", 0), r.value("step", -1)); });
  return all;
}

}  // namespace

std::vector<Check> prepared_checks(const nlohmann::json& workload, const nlohmann::json& record) {
  const auto& steps = list_at(workload, "steps");
  int control_failed = 0;
  int prepares = 0;
  std::string control_detail;
  std::int64_t chain = -1;  // the last prepared chain's tokens; -1 after a reset
  int prepared = 0;
  int firsts = 0;        // prepared requests that were the first after their prepare
  int firsts_exact = 0;
  int within = 0;        // prepared requests that took the whole chain and fed at most their own message
  bool first_after_prepare = false;
  std::set<std::int64_t> beyond;  // what later sessions took past the chain (the turn opener the first left)
  std::string exact_detail;
  std::string within_detail;
  int cold = 0;
  int cold_whole = 0;
  std::string cold_detail;
  // (rep, session, k) → (cold, prepared) TTFT of the session's k-th request of each arm: the
  // workload repeats both arms within one run.
  std::map<std::tuple<int, double, int>, std::pair<double, double>> ttft;
  std::map<std::tuple<int, double, std::string>, int> seen;
  for (const auto& r : in_order(record)) {
    const std::string arm = r.value("arm", "");
    const int step = r.value("step", -1);
    if (r.contains("control")) {
      if (r.contains("error")) {
        ++control_failed;
        control_detail = std::format("; step {} {}: {}", step, r.value("control", ""), r.value("error", ""));
      }
      if (arm == kPreparedResetArm) chain = -1;
      if (arm == kPreparedPrepareArm) {
        ++prepares;
        first_after_prepare = true;
        const nlohmann::json reply = r.value("reply", nlohmann::json::object());
        chain = reply.value("supported", false) ? count_of(reply, "tokens") : -1;
      }
      continue;
    }
    if (r.contains("error")) continue;
    const auto prompt = count_of(r, "prompt_tokens");
    const auto fed = count_of(r, "fed_tokens");
    const auto cached = count_of(r, "cached");
    const double session = step >= 0 && static_cast<std::size_t>(step) < steps.size() ? steps[static_cast<std::size_t>(step)].value("x", 0.0) : 0;
    const int k = seen[{r.value("rep", 0), session, arm}]++;
    auto& pair = ttft[{r.value("rep", 0), session, k}];
    if (arm == "prepared") {
      ++prepared;
      pair.second = r.value("ttft_ms", -1.0);
      const bool took_chain = chain > 0 && cached >= chain && fed == prompt - cached;
      if (took_chain) {
        ++within;
      } else {
        within_detail += std::format("; step {}: prompt {}, chain {}, fed {}, cached {}", step, prompt, chain, fed, cached);
      }
      if (first_after_prepare) {
        ++firsts;
        if (chain > 0 && fed == prompt - chain && cached == chain) {
          ++firsts_exact;
        } else {
          exact_detail += std::format("; step {}: prompt {}, chain {}, fed {}, cached {}", step, prompt, chain, fed, cached);
        }
      } else if (took_chain) {
        beyond.insert(cached - chain);
      }
      first_after_prepare = false;
    } else if (arm == "cold") {
      ++cold;
      pair.first = r.value("ttft_ms", -1.0);
      if (prompt > 0 && fed == prompt) {
        ++cold_whole;
      } else {
        cold_detail += std::format("; step {}: prompt {}, fed {}", step, prompt, fed);
      }
    }
  }
  std::vector<double> ratios;
  std::vector<double> cold_ms;
  std::vector<double> prepared_ms;
  for (const auto& [where, times] : ttft) {
    if (times.first > 0 && times.second > 0) {
      ratios.push_back(times.first / times.second);
      cold_ms.push_back(times.first);
      prepared_ms.push_back(times.second);
    }
  }
  std::vector<Check> checks;
  checks.push_back(make_check("every reset and prepare_modules call answered with the chain", prepares > 0 && control_failed == 0,
                              std::format("{} prepare(s), {} failed control call(s){}", prepares, control_failed, control_detail)));
  checks.push_back(make_check("the first request after a prepare feeds exactly its own message (fed = prompt − chain, cached = chain)",
                              firsts > 0 && firsts_exact == firsts,
                              std::format("{} of {} exact{}", firsts_exact, firsts, exact_detail)));
  std::string past_chain;
  for (const auto b : beyond) past_chain += std::format("{}{}", past_chain.empty() ? "" : ", ", b);
  checks.push_back(make_check("every prepared first request takes the whole chain and feeds at most its own message "
                              "(cached >= chain, fed = prompt − cached)",
                              prepared > 0 && within == prepared && beyond.size() <= 1,
                              std::format("{} of {}; later sessions also took {} token(s) past the chain (the user-turn "
                                          "opener an earlier session left; one value expected){}",
                                          within, prepared, past_chain.empty() ? "0" : past_chain, within_detail)));
  checks.push_back(make_check("cold first requests feed the whole prompt", cold > 0 && cold_whole == cold,
                              std::format("{} of {}{}", cold_whole, cold, cold_detail)));
  const double median = ratios.empty() ? 0 : summarize(ratios).median;
  checks.push_back(make_goal("goal: prepared first requests answer sooner (TTFT cold ÷ prepared > 1)", median > 1,
                             std::format("cold ÷ prepared = {} over {} pairs; TTFT cold {} ms, prepared {} ms (medians)",
                                         ratio_spread_cell(ratios), ratios.size(),
                                         format_number(cold_ms.empty() ? 0 : summarize(cold_ms).median),
                                         format_number(prepared_ms.empty() ? 0 : summarize(prepared_ms).median))));
  return checks;
}

}  // namespace prefixd::bench
