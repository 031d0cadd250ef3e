// burst: eight requests at once (--parallel 4) sharing one long prefix, each with its own short
// question. The prefix should be computed once, not once per request that arrived before it was
// cached: the target is Σ fed <= prefix + Σ questions + one guard token per request.
#include <format>
#include <latch>
#include <thread>

#include "bench/prompts.h"
#include "bench/scenario.h"
#include "bench/stats.h"
#include "bench/table.h"

namespace prefixd::bench {
namespace {

constexpr const char* kName = "burst";
constexpr std::uint64_t kSeed = 0xb045'0001;
constexpr std::size_t kQuestionTokens = 20;
constexpr int kParallel = 4;

}  // namespace

ScenarioReport run_burst(ScenarioEnv& env) {
  const int prefix_tokens = env.tokens_or(2048);
  const int requests = std::max(1, env.options().sessions);
  const auto server = env.start_server(
      kName, {.parallel = kParallel,
              .ctx_size = context_for(kParallel * (prefix_tokens + 64) + 2 * (prefix_tokens + requests * 32))});
  const BenchClient client = env.client(*server);
  const TokenRange range = token_range_for_vocab(client.vocab_size());
  const TokenIds prefix = random_tokens(kSeed, static_cast<std::size_t>(prefix_tokens), range);

  std::vector<nlohmann::json> bodies;
  std::int64_t question_total = 0;
  for (int i = 0; i < requests; ++i) {
    TokenIds prompt = prefix;
    const TokenIds question = random_tokens(kSeed + 1 + static_cast<std::uint64_t>(i), kQuestionTokens, range);
    prompt.insert(prompt.end(), question.begin(), question.end());
    question_total += static_cast<std::int64_t>(question.size());
    bodies.push_back({{"prompt", prompt},
                      {"max_tokens", 1},
                      {"temperature", 0},
                      {"prompt_cache_key", std::format("bench-burst-{}", i)}});
  }

  std::vector<CompletionResult> results(static_cast<std::size_t>(requests));
  {
    // Every thread waits at the latch, so the requests leave as close together as threads allow.
    std::latch start(requests);
    std::vector<std::jthread> threads;
    for (int i = 0; i < requests; ++i) {
      threads.emplace_back([&, i] {
        const auto index = static_cast<std::size_t>(i);
        start.arrive_and_wait();
        results[index] = client.stream("/v1/completions", bodies[index]);
      });
    }
  }  // the jthreads join here
  for (int i = 0; i < requests; ++i) require_ok(results[static_cast<std::size_t>(i)], std::format("request {}", i));

  Table table({"request", "prompt tokens", "cached", "fed", "outcome", "tier", "TTFT ms (client)", "queued_ms", "prompt_ms"});
  nlohmann::json rows = nlohmann::json::array();
  std::int64_t fed_total = 0;
  std::vector<double> ttfts;
  for (int i = 0; i < requests; ++i) {
    const auto& r = results[static_cast<std::size_t>(i)];
    table.add_row({std::to_string(i), cell(r.prompt_tokens), cell(r.cached_tokens), cell(r.fed_tokens), r.outcome, r.tier,
                   cell_ms(r.ttft_ms), cell_ms(r.queued_ms), cell_ms(r.prompt_ms)});
    fed_total += std::max<std::int64_t>(0, r.fed_tokens);
    ttfts.push_back(r.ttft_ms);
    rows.push_back(r.to_json());
  }
  const std::int64_t bound = prefix_tokens + question_total + requests;
  const Summary ttft = summarize(ttfts);
  env.out() << std::format("{} requests at once, --parallel {}, a {}-token shared prefix + {} distinct tokens each, "
                           "max_tokens 1.\n\n",
                           requests, kParallel, prefix_tokens, kQuestionTokens)
            << table.render() << "\n"
            << std::format("Σ fed {} vs bound {} (prefix {} + questions {} + {}); TTFT median {} ms ({}–{}).\n", fed_total,
                           bound, prefix_tokens, question_total, requests, format_number(ttft.median),
                           format_number(ttft.min), format_number(ttft.max));
  ScenarioReport report;
  report.checks.push_back(make_check("Σ fed <= prefix + Σ questions + requests", fed_total <= bound,
                                     std::format("Σ fed {}, bound {} (all-cold would be {})", fed_total, bound,
                                                 static_cast<std::int64_t>(requests) * prefix_tokens + question_total)));
  report.data = {{"prefix_tokens", prefix_tokens}, {"requests", rows}, {"fed_total", fed_total}, {"bound", bound},
                 {"ttft_ms", summary_json(ttft, ttfts)}};
  return report;
}

}  // namespace prefixd::bench
