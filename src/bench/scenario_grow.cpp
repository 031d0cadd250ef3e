// grow: one conversation of eight turns under one prompt_cache_key. Each turn resends the whole
// transcript (with the replies the server actually gave) plus a new user message, so everything
// but the new message, and the reply's closing markers, should come from the cache.
#include <format>

#include "bench/prompts.h"
#include "bench/scenario.h"
#include "bench/stats.h"
#include "bench/table.h"

namespace prefixd::bench {
namespace {

constexpr const char* kName = "grow";
constexpr std::uint64_t kSeed = 0x6707'0001;
constexpr int kTurns = 8;
constexpr int kReplyTokens = 32;

}  // namespace

ScenarioReport run_grow(ScenarioEnv& env) {
  const int system_tokens = env.tokens_or(300);
  const auto server = env.start_server(kName, {.parallel = 1, .ctx_size = context_for(2 * (system_tokens + kTurns * 160))});
  const BenchClient client = env.client(*server);

  nlohmann::json messages = nlohmann::json::array();
  messages.push_back({{"role", "system"}, {"content", sized_text(client, kSeed, system_tokens)}});
  Table table({"turn", "prompt tokens", "cached", "fed", "new", "reply → retokenized", "outcome", "tier", "TTFT ms (client)",
               "prompt_ms (server)"});
  nlohmann::json turns = nlohmann::json::array();
  CompletionResult previous;
  std::int64_t fed_total = 0;
  std::int64_t prompt_total = 0;
  for (int turn = 1; turn <= kTurns; ++turn) {
    const auto words = static_cast<std::size_t>(12 + (turn % 3) * 6);
    messages.push_back({{"role", "user"}, {"content", make_text(kSeed + static_cast<std::uint64_t>(turn), words)}});
    const nlohmann::json body = {{"messages", messages},
                                 {"max_tokens", kReplyTokens},
                                 {"temperature", 0},
                                 {"prompt_cache_key", "bench-grow"}};
    const auto r = require_ok(client.stream("/v1/chat/completions", body), std::format("turn {}", turn));
    messages.push_back({{"role", "assistant"}, {"content", r.text}});
    // A reply whose text tokenizes differently from the generated ids cannot be matched in full.
    const auto retokenized = static_cast<std::int64_t>(client.tokenize(r.text, false).size());
    // Tokens the cache cannot have: this prompt minus the last prompt and the reply it produced.
    const std::int64_t fresh = turn == 1 ? r.prompt_tokens : r.prompt_tokens - previous.prompt_tokens - previous.completion_tokens;
    table.add_row({std::to_string(turn), cell(r.prompt_tokens), cell(r.cached_tokens), cell(r.fed_tokens), cell(fresh),
                   std::format("{} → {}", cell(r.completion_tokens), retokenized), r.outcome, r.tier, cell_ms(r.ttft_ms),
                   cell_ms(r.prompt_ms)});
    auto j = r.to_json();
    j["turn"] = turn;
    j["new_tokens"] = fresh;
    j["reply_retokenized"] = retokenized;
    turns.push_back(std::move(j));
    env.note(kName, std::format("turn {}: prompt {}, fed {}, {}", turn, r.prompt_tokens, r.fed_tokens, r.outcome));
    fed_total += r.fed_tokens;
    prompt_total += r.prompt_tokens;
    previous = r;
  }
  env.out() << std::format("{} turns, system prompt ~{} tokens, max_tokens {}; \"new\" = prompt − previous prompt − "
                           "previous completion.\n\n",
                           kTurns, system_tokens, kReplyTokens)
            << table.render() << "\n"
            << std::format("Fed {} of {} prompt tokens over the conversation ({}).\n", fed_total, prompt_total,
                           format_ratio(ratio(static_cast<double>(fed_total), static_cast<double>(prompt_total))));
  ScenarioReport report;
  report.data = {{"system_tokens", system_tokens}, {"turns", turns}, {"fed_total", fed_total}, {"prompt_total", prompt_total}};
  return report;
}

}  // namespace prefixd::bench
