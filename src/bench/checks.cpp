#include "bench/checks.h"

#include <algorithm>
#include <cstdint>
#include <format>
#include <map>
#include <utility>

#include "bench/report_disk.h"
#include "bench/report_stats.h"
#include "bench/stats.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

constexpr double kWarmSpeedup = 10;   // a warm resend answers at least this much sooner than cold
constexpr double kHeldOverDedup = 1.2;  // held K/V at most this much above one copy of each prefix

std::int64_t count_at(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<std::int64_t>() : -1;
}

std::int64_t number_at(const nlohmann::json& j, const char* pointer) {
  const nlohmann::json::json_pointer where(pointer);
  return j.contains(where) && j.at(where).is_number() ? j.at(where).get<std::int64_t>() : -1;
}

// The answered requests, each with the session of its step, in step order per repetition.
struct Sent {
  int rep = 0;
  std::string session;
  std::string arm;
  nlohmann::json request;
};
std::vector<Sent> sent_requests(const nlohmann::json& workload, const nlohmann::json& record) {
  const auto& steps = list_at(workload, "steps");
  std::vector<Sent> out;
  for (const auto& r : list_at(record, "requests")) {
    if (r.contains("error")) continue;
    const auto step = static_cast<std::size_t>(r.value("step", -1));
    const std::string session = step < steps.size() ? steps[step].value("session", "") : "";
    out.push_back({r.value("rep", 0), session, r.value("arm", ""), r});
  }
  std::ranges::stable_sort(out, {}, [](const Sent& s) { return std::pair(s.rep, s.request.value("step", -1)); });
  return out;
}

std::vector<Check> resend_checks(const nlohmann::json& workload, const nlohmann::json& record) {
  std::int64_t warm_max = -1;
  int cold_short = 0;
  std::string cold_detail;
  for (const auto& s : sent_requests(workload, record)) {
    const auto evaluated = count_at(s.request, "evaluated");
    if (s.arm.starts_with("warm")) warm_max = std::max(warm_max, evaluated);
    if (s.arm.starts_with("cold") && evaluated < count_at(s.request, "prompt_tokens")) {
      ++cold_short;
      cold_detail = std::format("; {} evaluated {} of {}", s.arm, evaluated, count_at(s.request, "prompt_tokens"));
    }
  }
  std::vector<Check> checks;
  checks.push_back(make_check("warm requests evaluate at most 1 prompt token", warm_max >= 0 && warm_max <= 1,
                              std::format("most evaluated by a warm request: {}", warm_max)));
  checks.push_back(make_check("cold requests evaluate the whole prompt", cold_short == 0,
                              std::format("{} short{}", cold_short, cold_detail)));
  // The longest prompt shows the cache best: its cold prefill dwarfs one decode step.
  const auto& arms = list_at(workload, "arms");
  std::string longest;
  for (const auto& arm : arms) {
    const std::string name = arm.value("name", "");
    if (name.starts_with("cold ")) longest = name.substr(5);
  }
  const Summary cold = arm_stats(record, "cold " + longest).ttft_ms;
  const Summary warm = arm_stats(record, "warm " + longest).ttft_ms;
  const auto speedup = ratio(cold.median, warm.median);
  checks.push_back(make_check(std::format("warm TTFT <= cold ÷ {:.0f} at {} tokens", kWarmSpeedup, longest),
                              speedup && *speedup >= kWarmSpeedup,
                              std::format("cold {} ms ÷ warm {} ms = {}", format_number(cold.median),
                                          format_number(warm.median), format_ratio(speedup))));
  return checks;
}

// Every request after a session's first reuses the whole previous prompt of that session and
// evaluates only what was added since (plus the one-token guard).
std::vector<Check> session_checks(const nlohmann::json& workload, const nlohmann::json& record) {
  std::map<std::pair<int, std::string>, std::int64_t> previous_prompt;
  int followups = 0;
  int not_reused = 0;
  int over = 0;
  std::string reuse_detail;
  std::string over_detail;
  for (const auto& s : sent_requests(workload, record)) {
    const auto prompt = count_at(s.request, "prompt_tokens");
    const auto key = std::pair(s.rep, s.session);
    const auto it = previous_prompt.find(key);
    if (it != previous_prompt.end()) {
      ++followups;
      const auto cached = count_at(s.request, "cached");
      const auto evaluated = count_at(s.request, "evaluated");
      const auto added = prompt - it->second;
      if (cached < it->second) {
        ++not_reused;
        reuse_detail += std::format("; {} step {}: cached {} of {}", s.session, s.request.value("step", -1), cached, it->second);
      }
      if (evaluated < 0 || evaluated > added + 1) {
        ++over;
        over_detail += std::format("; {} step {}: evaluated {}, added {}", s.session, s.request.value("step", -1), evaluated, added);
      }
    }
    previous_prompt[key] = prompt;
  }
  return {make_check("each request reuses its session's previous prompt", followups > 0 && not_reused == 0,
                     std::format("{} of {} follow-ups reused it{}", followups - not_reused, followups, reuse_detail)),
          make_check("follow-ups evaluate only the added tokens (+1)", followups > 0 && over == 0,
                     std::format("{} of {} within{}", followups - over, followups, over_detail))};
}

// Each tier on its own holds every distinct token about once: one copy of the shared prefix, not
// one per session. An entry may also hold its last, partial block of the shared prefix again.
std::vector<Check> shared_checks(const nlohmann::json& record) {
  const std::string name = std::format("each tier holds <= {}× one copy of each distinct token (+ a block per entry)",
                                       kHeldOverDedup);
  const nlohmann::json sharing = record.value("sharing", nlohmann::json::object());
  const nlohmann::json stats = sharing.value("cache_stats", nlohmann::json::object());
  const auto per_token = number_at(stats, "/kv_bytes_per_token");
  const auto trie = count_at(sharing, "prompt_trie_tokens");
  if (per_token <= 0 || trie < 0) return {{name, Check::Verdict::skip, "no /v1/cache/stats or prompt tokens recorded"}};
  std::int64_t completions = 0;
  for (const auto& r : list_at(record, "requests")) completions += std::max<std::int64_t>(0, count_at(r, "completion_tokens"));
  const auto block = std::max<std::int64_t>(1, number_at(stats, "/block_size"));
  bool within = true;
  std::string detail;
  for (const char* tier : {"device", "host"}) {
    const auto bytes = std::max<std::int64_t>(0, number_at(stats, std::format("/tiers/{}/bytes", tier).c_str()));
    const auto entries = std::max<std::int64_t>(0, number_at(stats, std::format("/tiers/{}/entries", tier).c_str()));
    const std::int64_t once = (trie + completions + entries * block) * per_token;
    const auto held = ratio(static_cast<double>(bytes), static_cast<double>(once));
    within = within && (bytes == 0 || (held && *held <= kHeldOverDedup));
    detail += std::format("{}{}: {} bytes in {} entries vs {} ({} distinct tokens + {} × {}-token block, × {} bytes): {}",
                          detail.empty() ? "" : "; ", tier, bytes, entries, once, trie + completions, entries, block,
                          per_token, format_ratio(held));
  }
  return {make_check(name, within, detail)};
}

std::vector<Check> burst_checks(const nlohmann::json& record) {
  const std::string name = "Σ evaluated <= distinct prompt tokens + 1 per request";
  const auto trie = count_at(record.value("sharing", nlohmann::json::object()), "prompt_trie_tokens");
  const ArmStats all = arm_stats(record, "");
  if (trie < 0 || all.n == 0) return {{name, Check::Verdict::skip, "no prompt tokens recorded"}};
  const std::int64_t bound = trie + all.n;
  return {make_check(name, !all.counts_missing && all.evaluated_sum <= bound,
                     std::format("Σ evaluated {} vs bound {} ({} distinct + {}); every prompt in full: {}", all.evaluated_sum,
                                 bound, trie, all.n, all.prompt_sum))};
}

std::vector<Check> unique_checks(const nlohmann::json& record) {
  const ArmStats all = arm_stats(record, "");
  return {make_check("nothing is reused (the workload is what it claims)", all.n > 0 && all.cached_sum == 0,
                     std::format("Σ cached {} over {} requests", all.cached_sum, all.n))};
}

std::vector<Check> restart_checks(const nlohmann::json& workload, const nlohmann::json& record) {
  const RestartFacts f = restart_facts(record);
  if (!f.disk) return {};
  int planned = 0;
  for (const auto& step : list_at(workload, "steps")) {
    if (step.value("arm", "") == kRestartArm) planned = std::max(planned, step.value("planned_tokens", 0));
  }
  std::vector<Check> checks;
  const double mib = 1024.0 * 1024.0;
  const double files = f.files_read.empty() ? 0 : summarize(f.files_read).median;
  const double bytes = f.bytes_read.empty() ? 0 : summarize(f.bytes_read).median;
  checks.push_back(make_check(std::format("after a restart the prompt comes back from disk (cached >= prompt − {})", kRestoreSlack),
                              f.restarts > 0 && f.most_missing >= 0 && f.most_missing <= kRestoreSlack,
                              std::format("fewest cached {} of {} prompt tokens over {} restart(s); {:.0f} files, {:.1f} MiB "
                                          "read per restore",
                                          f.fewest_cached, f.prompt_tokens, f.restarts, files, bytes / mib)));
  auto at_size = [&](std::string name, const std::vector<double>& ratios, bool met, const std::string& what) {
    const std::string measured = std::format("{} = {} over {} restart(s)", what, ratio_spread_cell(ratios), ratios.size());
    if (planned < kRestartGatePrompt) {
      return Check{std::move(name), Check::Verdict::skip,
                   std::format("a {}-token prompt; the gate is set at {} tokens (measured {})", planned, kRestartGatePrompt,
                               measured)};
    }
    return make_check(std::move(name), !ratios.empty() && met, measured);
  };
  const double cold_speedup = f.cold_over_restart.empty() ? 0 : summarize(f.cold_over_restart).median;
  const double over_warm = f.restart_over_warm.empty() ? 0 : summarize(f.restart_over_warm).median;
  checks.push_back(at_size(std::format("after-restart TTFT <= cold ÷ {:.0f} at {}+ tokens", kRestartColdSpeedup, kRestartGatePrompt),
                           f.cold_over_restart, cold_speedup >= kRestartColdSpeedup, "cold ÷ after restart"));
  checks.push_back(at_size(std::format("after-restart TTFT <= RAM-warm × {:.0f} at {}+ tokens", kRestartOverWarm, kRestartGatePrompt),
                           f.restart_over_warm, over_warm <= kRestartOverWarm, "after restart ÷ warm"));
  const std::string goal = std::format("goal: disk restore bandwidth >= {} × a sequential read of the same bytes",
                                       format_number(kRestoreBandwidthGoal));
  if (f.bandwidth_fraction.empty()) {
    checks.push_back({goal, Check::Verdict::skip, "no restore with a sequential read to compare"});
  } else {
    checks.push_back(make_goal(goal, summarize(f.bandwidth_fraction).median >= kRestoreBandwidthGoal,
                               std::format("restore ÷ sequential = {}; restore {} MiB/s, sequential {} MiB/s (medians)",
                                           ratio_spread_cell(f.bandwidth_fraction),
                                           format_number(summarize(f.restore_bytes_per_s).median / mib),
                                           format_number(summarize(f.sequential_bytes_per_s).median / mib))));
  }
  return checks;
}

}  // namespace

const char* verdict_name(Check::Verdict verdict) {
  switch (verdict) {
    case Check::Verdict::pass: return "PASS";
    case Check::Verdict::fail: return "FAIL";
    case Check::Verdict::skip: return "SKIP";
    case Check::Verdict::miss: return "MISS";
  }
  return "SKIP";
}

Check make_check(std::string name, bool pass, std::string detail) {
  return Check{std::move(name), pass ? Check::Verdict::pass : Check::Verdict::fail, std::move(detail)};
}

Check make_goal(std::string name, bool met, std::string detail) {
  return Check{std::move(name), met ? Check::Verdict::pass : Check::Verdict::miss, std::move(detail)};
}

nlohmann::json Check::to_json() const { return {{"name", name}, {"verdict", verdict_name(verdict)}, {"detail", detail}}; }

std::vector<Check> workload_checks(const nlohmann::json& workload, const nlohmann::json& record) {
  const std::string name = workload.value("name", "");
  if (name == "resend") return resend_checks(workload, record);
  if (name == "grow" || name == "thrash") return session_checks(workload, record);
  if (name == "shared") return shared_checks(record);
  if (name == "burst") return burst_checks(record);
  if (name == "unique") return unique_checks(record);
  if (name == "restart") return restart_checks(workload, record);
  if (name == "prepared") return prepared_checks(workload, record);
  if (name == "toolloop") return toolloop_checks(record);
  if (name == "preempt") return preempt_checks(record);
  return {};
}

std::vector<Check> preempt_checks(const nlohmann::json& record) {
  // "A few seconds": the restore itself and one decode step of the running requests.
  constexpr double kHitSlackMs = 3000;
  // The noise one cold prefill shows between two runs on a shared machine.
  constexpr double kColdNoise = 0.05;
  const Summary during = arm_stats(record, kPreemptHitDuring).ttft_ms;
  const Summary hit_alone = arm_stats(record, kPreemptHitAlone).ttft_ms;
  const Summary cold_with = arm_stats(record, kPreemptColdWithHit).ttft_ms;
  const Summary cold_alone = arm_stats(record, kPreemptColdAlone).ttft_ms;
  if (during.n == 0 || hit_alone.n == 0 || cold_with.n == 0 || cold_alone.n == 0) {
    return {{"preempt goals", Check::Verdict::skip, "an arm has no answered request"}};
  }
  const double delay = cold_with.median - cold_alone.median;
  return {make_goal(std::format("a hit during a cold prefill answers within {:.0f} s of the hit alone", kHitSlackMs / 1000),
                    during.median <= hit_alone.median + kHitSlackMs,
                    std::format("median TTFT {} ms during, {} ms alone", format_number(during.median),
                                format_number(hit_alone.median))),
          make_goal(std::format("the cold prompt is delayed by at most the hit's time alone (+{:.0f}% noise)", kColdNoise * 100),
                    delay <= hit_alone.median + kColdNoise * cold_alone.median,
                    std::format("median {} ms with the hit, {} ms alone: {} ms later; the hit alone {} ms",
                                format_number(cold_with.median), format_number(cold_alone.median), format_number(delay),
                                format_number(hit_alone.median)))};
}

bool checks_passed(const nlohmann::json& checks) {
  return std::ranges::none_of(checks, [](const nlohmann::json& c) { return c.value("verdict", "") == "FAIL"; });
}

}  // namespace prefixd::bench
