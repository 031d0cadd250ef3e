// thrash: one slot (--parallel 1), three sessions with distinct histories taking turns: A B C, then
// A B C again with one more user turn each. A cache that keeps only the last slot's K/V re-feeds
// every history in round 2; the target is to feed only the new tokens (+ the one-token guard).
#include <array>
#include <format>

#include "bench/prompts.h"
#include "bench/scenario.h"
#include "bench/stats.h"
#include "bench/table.h"

namespace prefixd::bench {
namespace {

constexpr const char* kName = "thrash";
constexpr std::uint64_t kSeed = 0x7a5a'0001;
constexpr int kReplyTokens = 16;
constexpr std::int64_t kSlack = 8;  // retokenizing a returned reply may differ by a few tokens

struct Session {
  std::string name;
  nlohmann::json messages;
  CompletionResult round1;
  CompletionResult round2;
  std::int64_t reply_retokenized = -1;  // tokens the round-1 reply text becomes when sent back
};

nlohmann::json chat(const Session& s) {
  return {{"messages", s.messages}, {"max_tokens", kReplyTokens}, {"temperature", 0}, {"prompt_cache_key", "bench-thrash-" + s.name}};
}

}  // namespace

ScenarioReport run_thrash(ScenarioEnv& env) {
  const int history_tokens = env.tokens_or(500);
  const auto server = env.start_server(kName, {.parallel = 1, .ctx_size = context_for(2 * 3 * (history_tokens + 128))});
  const BenchClient client = env.client(*server);

  std::array<Session, 3> sessions{Session{"A", {}, {}, {}}, Session{"B", {}, {}, {}}, Session{"C", {}, {}, {}}};
  for (std::size_t i = 0; i < sessions.size(); ++i) {
    auto& s = sessions[i];
    const std::uint64_t seed = kSeed + 100 * i;
    s.messages = nlohmann::json::array(
        {{{"role", "system"}, {"content", sized_text(client, seed, std::max(16, history_tokens - 24))}},
         {{"role", "user"}, {"content", make_text(seed + 1, 12) + "?"}}});
  }
  for (auto& s : sessions) {
    s.round1 = require_ok(client.stream("/v1/chat/completions", chat(s)), "round 1, session " + s.name);
    s.messages.push_back({{"role", "assistant"}, {"content", s.round1.text}});
    s.reply_retokenized = static_cast<std::int64_t>(client.tokenize(s.round1.text, false).size());
    s.messages.push_back({{"role", "user"}, {"content", make_text(kSeed + 7 + static_cast<std::uint64_t>(s.name[0]), 10) + "?"}});
    env.note(kName, std::format("round 1 {}: prompt {}, fed {}", s.name, s.round1.prompt_tokens, s.round1.fed_tokens));
  }
  for (auto& s : sessions) {
    s.round2 = require_ok(client.stream("/v1/chat/completions", chat(s)), "round 2, session " + s.name);
    env.note(kName, std::format("round 2 {}: prompt {}, fed {}, {}", s.name, s.round2.prompt_tokens, s.round2.fed_tokens,
                                s.round2.outcome));
  }

  Table table({"session", "round", "prompt tokens", "cached", "fed", "new", "reply → retokenized", "outcome", "tier",
               "TTFT ms (client)"});
  ScenarioReport report;
  nlohmann::json rows = nlohmann::json::array();
  bool within = true;
  bool history_kept = true;
  std::string detail;
  std::string kept_detail;
  for (const auto& s : sessions) {
    const auto& a = s.round1;
    const auto& b = s.round2;
    const std::int64_t fresh = b.prompt_tokens - a.prompt_tokens - a.completion_tokens;
    table.add_row({s.name, "1", cell(a.prompt_tokens), cell(a.cached_tokens), cell(a.fed_tokens), cell(a.prompt_tokens), "",
                   a.outcome, a.tier, cell_ms(a.ttft_ms)});
    table.add_row({s.name, "2", cell(b.prompt_tokens), cell(b.cached_tokens), cell(b.fed_tokens), cell(fresh),
                   std::format("{} → {}", cell(a.completion_tokens), cell(s.reply_retokenized)), b.outcome, b.tier,
                   cell_ms(b.ttft_ms)});
    // What thrashing destroys: the history itself. Reply tokens may legitimately miss when the
    // reply's text does not tokenize back to the ids that were generated.
    history_kept = history_kept && b.cached_tokens >= a.prompt_tokens;
    kept_detail += std::format("{}{}: cached {} of round-1 prompt {}", kept_detail.empty() ? "" : "; ", s.name,
                               b.cached_tokens, a.prompt_tokens);
    within = within && b.fed_tokens >= 0 && b.fed_tokens <= fresh + kSlack;
    detail += std::format("{}{}: fed {} vs new {} (+1 = {})", detail.empty() ? "" : "; ", s.name, b.fed_tokens, fresh, fresh + 1);
    rows.push_back({{"session", s.name}, {"round1", a.to_json()}, {"round2", b.to_json()}, {"new_tokens", fresh},
                    {"reply_retokenized", s.reply_retokenized}});
  }
  env.out() << std::format("--parallel 1; three sessions with ~{}-token histories, then one more turn each; \"new\" = "
                           "round-2 prompt − round-1 prompt − round-1 completion.\n\n",
                           history_tokens)
            << table.render();
  report.checks.push_back(make_check(std::format("round-2 fed <= new + 1 (slack: new + {})", kSlack), within, detail));
  report.checks.push_back(make_check("round 2 reuses each whole round-1 prompt", history_kept, kept_detail));
  report.data = {{"history_tokens", history_tokens}, {"sessions", rows}};
  return report;
}

}  // namespace prefixd::bench
