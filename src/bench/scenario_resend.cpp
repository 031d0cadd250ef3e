// resend: the same N-token prompt again and again. Cold: a fresh cache before each run; warm: the
// prefix cached, so only the one-token guard should be fed and TTFT should be about one decode
// step at that context length.
#include <algorithm>
#include <format>
#include <set>

#include "bench/prompts.h"
#include "bench/scenario.h"
#include "bench/stats.h"
#include "bench/table.h"

namespace prefixd::bench {
namespace {

constexpr const char* kName = "resend";
constexpr std::uint64_t kSeed = 0x5e5e'0001;
constexpr int kDecodeProbeTokens = 33;  // 32 decode steps after the first sampled token

struct Arm {
  std::string name;
  std::vector<CompletionResult> runs;

  std::vector<double> values(double CompletionResult::*field) const {
    std::vector<double> out;
    for (const auto& r : runs) out.push_back(r.*field);
    return out;
  }
  std::vector<double> fed() const {
    std::vector<double> out;
    for (const auto& r : runs) out.push_back(static_cast<double>(r.fed_tokens));
    return out;
  }
  std::string outcomes() const {
    std::set<std::string> seen;
    for (const auto& r : runs) seen.insert(r.outcome.empty() ? "?" : r.outcome);
    std::string out;
    for (const auto& s : seen) out += (out.empty() ? "" : "/") + s;
    return out;
  }
  nlohmann::json to_json() const {
    const auto ttft = values(&CompletionResult::ttft_ms);
    const auto prompt_ms = values(&CompletionResult::prompt_ms);
    nlohmann::json requests = nlohmann::json::array();
    for (const auto& r : runs) requests.push_back(r.to_json());
    return {{"reps", runs.size()},
            {"ttft_ms", summary_json(summarize(ttft), ttft)},
            {"server_prompt_ms", summary_json(summarize(prompt_ms), prompt_ms)},
            {"fed_tokens", summary_json(summarize(fed()), fed())},
            {"outcomes", outcomes()},
            {"requests", requests}};
  }
};

nlohmann::json completion(const TokenIds& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"prompt_cache_key", "bench-resend"}};
}

}  // namespace

ScenarioReport run_resend(ScenarioEnv& env) {
  const int n = env.tokens_or(2048);
  const int warm_reps = std::max(1, env.options().reps.value_or(5));
  const int cold_reps = std::max(1, env.options().cold_reps);
  // Room for the held prompt in the device tier (half the context by default) and a running copy.
  const auto server = env.start_server(kName, {.parallel = 1, .ctx_size = context_for(2 * (n + 64))});
  const BenchClient client = env.client(*server);
  const TokenRange range = token_range_for_vocab(client.vocab_size());
  TokenIds prompt = random_tokens(kSeed, static_cast<std::size_t>(n), range);

  Arm cold{"cold", {}};
  Arm warm{"warm", {}};
  bool have_reset = true;
  for (int i = 0; i < cold_reps; ++i) {
    have_reset = have_reset && client.reset_cache();
    // Without the reset route a cold run needs a prompt the cache has never seen.
    if (!have_reset) prompt = random_tokens(kSeed + 1 + static_cast<std::uint64_t>(i), static_cast<std::size_t>(n), range);
    cold.runs.push_back(require_ok(client.stream("/v1/completions", completion(prompt, 1)), "cold request"));
    env.note(kName, std::format("cold {}/{}: TTFT {}", i + 1, cold_reps, format_ms(cold.runs.back().ttft_ms)));
  }
  for (int i = 0; i < warm_reps; ++i) {
    warm.runs.push_back(require_ok(client.stream("/v1/completions", completion(prompt, 1)), "warm request"));
    env.note(kName, std::format("warm {}/{}: TTFT {}, fed {}", i + 1, warm_reps, format_ms(warm.runs.back().ttft_ms),
                                warm.runs.back().fed_tokens));
  }
  const auto probe = require_ok(client.stream("/v1/completions", completion(prompt, kDecodeProbeTokens)), "decode probe");
  const double step_ms =
      probe.predicted_n >= 2 && probe.predicted_ms >= 0 ? probe.predicted_ms / static_cast<double>(probe.predicted_n - 1) : -1;

  const Summary cold_ttft = summarize(cold.values(&CompletionResult::ttft_ms));
  const Summary warm_ttft = summarize(warm.values(&CompletionResult::ttft_ms));
  const Summary cold_prompt = summarize(cold.values(&CompletionResult::prompt_ms));
  const Summary warm_prompt = summarize(warm.values(&CompletionResult::prompt_ms));
  const auto ttft_ratio = ratio(cold_ttft.median, warm_ttft.median);
  const auto prompt_ratio = ratio(cold_prompt.median, warm_prompt.median);
  const auto over_step = ratio(warm_ttft.median, step_ms);
  const auto server_over_step = ratio(warm_prompt.median, step_ms);
  const Summary warm_fed = summarize(warm.fed());
  const Summary cold_fed = summarize(cold.fed());

  Table arms({"arm", "reps", "TTFT ms (client) median (min–max)", "prompt_ms (server)", "fed tokens", "outcome"});
  for (const Arm* arm : {&cold, &warm}) {
    const Summary ttft = summarize(arm->values(&CompletionResult::ttft_ms));
    const Summary prompt_ms = summarize(arm->values(&CompletionResult::prompt_ms));
    const Summary fed = summarize(arm->fed());
    arms.add_row({arm->name, std::to_string(arm->runs.size()), format_summary(ttft), format_summary(prompt_ms),
                  fed.min == fed.max ? format_number(fed.min) : std::format("{}–{}", fed.min, fed.max), arm->outcomes()});
  }
  Table derived({"measure", "value"});
  derived.add_row({"prompt tokens", std::to_string(n)});
  derived.add_row({"cold ÷ warm TTFT (client)", format_ratio(ttft_ratio)});
  derived.add_row({"cold ÷ warm prompt_ms (server)", format_ratio(prompt_ratio)});
  derived.add_row({std::format("decode step at {} tokens", n),
                   step_ms < 0 ? std::format("n/a (predicted_n {})", probe.predicted_n)
                               : std::format("{} ms ({} ms / {} steps)", format_number(step_ms),
                                             format_number(probe.predicted_ms), probe.predicted_n - 1)});
  derived.add_row({"warm TTFT (client) ÷ decode step", format_ratio(over_step)});
  derived.add_row({"warm prompt_ms (server) ÷ decode step", format_ratio(server_over_step)});
  derived.add_row({"cold arm", have_reset ? "POST /v1/cache/reset before each run" : "a new prompt per run (no /v1/cache/reset)"});
  env.out() << std::format("Identical {}-token prompt, max_tokens 1.\n\n", n) << arms.render() << "\n" << derived.render();

  ScenarioReport report;
  bool one_token = true;
  for (const Arm* arm : {&cold, &warm}) {
    for (const auto& r : arm->runs) one_token = one_token && r.completion_tokens == 1;
  }
  report.checks.push_back(make_check("completion_tokens == 1 for max_tokens 1", one_token,
                                     one_token ? "every request" : "some request generated a different count"));
  report.checks.push_back(make_check("cold runs prefill the whole prompt", cold_fed.min >= n,
                                     std::format("cold fed {}–{} of {}", cold_fed.min, cold_fed.max, n)));
  report.checks.push_back(make_check("warm fed_tokens <= 1", warm_fed.n > 0 && warm_fed.max <= 1,
                                     std::format("warm fed max {}", warm_fed.max)));
  report.checks.push_back(make_check("cold/warm TTFT >= 50x", ttft_ratio && *ttft_ratio >= 50,
                                     std::format("{} (cold {} ms, warm {} ms)", format_ratio(ttft_ratio),
                                                 format_number(cold_ttft.median), format_number(warm_ttft.median))));
  if (step_ms < 0) {
    report.checks.push_back({"warm TTFT <= 1.5x decode step", Check::Verdict::skip,
                             std::format("the probe generated {} tokens, need >= 2", probe.predicted_n)});
  } else {
    report.checks.push_back(make_check("warm TTFT <= 1.5x decode step", over_step && *over_step <= 1.5,
                                       std::format("{} (warm {} ms, step {} ms)", format_ratio(over_step),
                                                   format_number(warm_ttft.median), format_number(step_ms))));
  }
  report.data = {{"tokens", n},
                 {"cold", cold.to_json()},
                 {"warm", warm.to_json()},
                 {"cold_over_warm_ttft", ttft_ratio ? nlohmann::json(*ttft_ratio) : nlohmann::json()},
                 {"cold_over_warm_prompt_ms", prompt_ratio ? nlohmann::json(*prompt_ratio) : nlohmann::json()},
                 {"decode_step_ms", step_ms},
                 {"decode_probe", probe.to_json()},
                 {"warm_ttft_over_decode_step", over_step ? nlohmann::json(*over_step) : nlohmann::json()},
                 {"warm_prompt_ms_over_decode_step", server_over_step ? nlohmann::json(*server_over_step) : nlohmann::json()},
                 {"cold_via_reset", have_reset}};
  return report;
}

}  // namespace prefixd::bench
