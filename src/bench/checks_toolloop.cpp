// The toolloop workload's checks: every turn's reply is one tool call, and from turn 2 on the
// server fed exactly the tool result and its scaffolding: fed = prompt − the tokens of the
// conversation through the previous reply (which the executor counted with POST /tokenize,
// messages and add_generation_prompt false, in the request's "history_tokens").
#include <algorithm>
#include <cstdint>
#include <format>

#include "bench/checks.h"
#include "bench/report_stats.h"

namespace prefixd::bench {
namespace {

std::int64_t count_of(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<std::int64_t>() : -1;
}

}  // namespace

std::vector<Check> toolloop_checks(const nlohmann::json& record) {
  const auto& requests = list_at(record, "requests");
  const bool counted = std::ranges::any_of(requests, [](const nlohmann::json& r) { return count_of(r, "history_tokens") >= 0; });
  const std::string calls_name = "every reply is one tool call (finish_reason tool_calls)";
  const std::string fed_name = "from turn 2 on, fed = prompt − the conversation through the previous reply, exactly";
  if (!counted) {
    const std::string why = "the server did not count a conversation's tokens (POST /tokenize with messages)";
    return {Check{calls_name, Check::Verdict::skip, why}, Check{fed_name, Check::Verdict::skip, why}};
  }
  int replies = 0;
  int calls = 0;
  std::string calls_detail;
  int later = 0;
  int exact = 0;
  std::int64_t fed_min = -1;
  std::int64_t fed_max = -1;
  std::int64_t prompt_max = 0;
  std::string fed_detail;
  for (const auto& r : requests) {
    if (r.contains("error")) {
      calls_detail += std::format("; step {}: {}", r.value("step", -1), r.value("error", ""));
      ++replies;
      continue;
    }
    ++replies;
    const auto call_count = r.contains("tool_calls") ? r["tool_calls"].size() : 0;
    if (r.value("finish_reason", "") == "tool_calls" && call_count == 1) {
      ++calls;
    } else {
      calls_detail += std::format("; step {}: finish {}, {} call(s)", r.value("step", -1), r.value("finish_reason", ""), call_count);
    }
    if (!r.contains("history_tokens")) continue;
    ++later;
    const auto prompt = count_of(r, "prompt_tokens");
    const auto fed = count_of(r, "fed_tokens");
    const auto history = count_of(r, "history_tokens");
    prompt_max = std::max(prompt_max, prompt);
    if (history > 0 && prompt > history && fed == prompt - history) {
      ++exact;
      fed_min = fed_min < 0 ? fed : std::min(fed_min, fed);
      fed_max = std::max(fed_max, fed);
    } else {
      fed_detail += std::format("; step {}: prompt {}, through the previous reply {}, fed {}", r.value("step", -1), prompt,
                                history, fed);
    }
  }
  std::vector<Check> checks;
  checks.push_back(make_check(calls_name, replies > 0 && calls == replies,
                              std::format("{} of {}{}", calls, replies, calls_detail)));
  checks.push_back(make_check(fed_name, later > 0 && exact == later,
                              std::format("{} of {} exact; {}prompts up to {}{}", exact, later,
                                          exact > 0 ? std::format("fed {}–{} tokens per turn, ", fed_min, fed_max) : "",
                                          prompt_max, fed_detail)));
  return checks;
}

}  // namespace prefixd::bench
