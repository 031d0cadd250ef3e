// shared: several sessions send the same long system prompt with different short questions. A
// cache that shares the common prefix holds about one copy of it; the target is at most 1.2× the
// deduplicated K/V bytes.
#include <format>

#include "bench/prompts.h"
#include "bench/scenario.h"
#include "bench/stats.h"
#include "bench/table.h"

namespace prefixd::bench {
namespace {

constexpr const char* kName = "shared";
constexpr std::uint64_t kSeed = 0x5a4e'0001;
constexpr int kReplyTokens = 16;
constexpr double kTarget = 1.2;

std::int64_t number_at(const nlohmann::json& j, const char* pointer) {
  const nlohmann::json::json_pointer where(pointer);
  if (!j.contains(where) || !j.at(where).is_number()) return -1;
  return j.at(where).get<std::int64_t>();
}

}  // namespace

ScenarioReport run_shared(ScenarioEnv& env) {
  const int system_tokens = env.tokens_or(1000);
  const int sessions = std::max(1, env.options().sessions);
  // Room for every session's full copy, so a cache that does not share shows it in its bytes
  // instead of evicting.
  const auto server = env.start_server(kName, {.parallel = 1, .ctx_size = context_for(2 * sessions * (system_tokens + 96))});
  const BenchClient client = env.client(*server);
  const std::string system = sized_text(client, kSeed, system_tokens);

  Table table({"session", "prompt tokens", "cached", "fed", "completion", "outcome", "tier", "TTFT ms (client)"});
  std::vector<TokenIds> prompts;
  std::int64_t completions = 0;
  nlohmann::json requests = nlohmann::json::array();
  for (int i = 0; i < sessions; ++i) {
    const nlohmann::json messages = {
        {{"role", "system"}, {"content", system}},
        {{"role", "user"}, {"content", make_text(kSeed + 1 + static_cast<std::uint64_t>(i), 10) + "?"}}};
    const nlohmann::json body = {{"messages", messages},
                                 {"max_tokens", kReplyTokens},
                                 {"temperature", 0},
                                 {"user", std::format("bench-user-{}", i)},
                                 {"prompt_cache_key", std::format("bench-shared-{}", i)}};
    const auto r = require_ok(client.stream("/v1/chat/completions", body), std::format("session {}", i));
    prompts.push_back(client.chat_prompt_tokens(messages));
    if (static_cast<std::int64_t>(prompts.back().size()) != r.prompt_tokens) {
      env.note(kName, std::format("note: /apply-template + /tokenize gives {} tokens, the completion reported {}",
                                  prompts.back().size(), r.prompt_tokens));
    }
    completions += std::max<std::int64_t>(0, r.completion_tokens);
    table.add_row({std::to_string(i), cell(r.prompt_tokens), cell(r.cached_tokens), cell(r.fed_tokens),
                   cell(r.completion_tokens), r.outcome, r.tier, cell_ms(r.ttft_ms)});
    requests.push_back(r.to_json());
    env.note(kName, std::format("session {}: prompt {}, fed {}, {}", i, r.prompt_tokens, r.fed_tokens, r.outcome));
  }
  const auto dedup_tokens = static_cast<std::int64_t>(unique_prefix_tokens(prompts)) + completions;
  std::int64_t all_tokens = completions;
  for (const auto& p : prompts) all_tokens += static_cast<std::int64_t>(p.size());

  ScenarioReport report;
  report.data = {{"sessions", sessions}, {"system_tokens", system_tokens}, {"dedup_tokens", dedup_tokens},
                 {"all_tokens", all_tokens}, {"requests", requests}};
  env.out() << std::format("{} sessions, one system prompt of ~{} tokens, a distinct question each, max_tokens {}.\n\n",
                           sessions, system_tokens, kReplyTokens)
            << table.render() << "\n";
  const auto stats = client.cache_stats();
  if (!stats) {
    env.out() << "GET /v1/cache/stats: 404, no held-bytes figure.\n";
    report.checks.push_back({"held bytes <= 1.2x deduplicated K/V", Check::Verdict::skip, "GET /v1/cache/stats answered 404"});
    return report;
  }
  const std::int64_t per_token = number_at(*stats, "/kv_bytes_per_token");
  const std::int64_t device_bytes = number_at(*stats, "/tiers/device/bytes");
  const std::int64_t host_bytes = number_at(*stats, "/tiers/host/bytes");
  const std::int64_t device_tokens = number_at(*stats, "/tiers/device/tokens");
  const std::int64_t held = std::max<std::int64_t>(0, device_bytes) + std::max<std::int64_t>(0, host_bytes);
  const std::int64_t ideal = per_token > 0 ? dedup_tokens * per_token : -1;
  const auto held_ratio = ratio(static_cast<double>(held), static_cast<double>(ideal));

  Table summary({"measure", "value"});
  summary.add_row({"deduplicated tokens (trie of prompts + completions)", std::to_string(dedup_tokens)});
  summary.add_row({"tokens without sharing", std::to_string(all_tokens)});
  summary.add_row({"kv_bytes_per_token", cell(per_token)});
  summary.add_row({"deduplicated K/V bytes", cell(ideal)});
  summary.add_row({"device tier bytes / tokens", std::format("{} / {}", cell(device_bytes), cell(device_tokens))});
  summary.add_row({"host tier bytes", cell(host_bytes)});
  summary.add_row({"held ÷ deduplicated", format_ratio(held_ratio)});
  env.out() << summary.render();
  report.data["cache_stats"] = *stats;
  report.data["held_bytes"] = held;
  report.data["dedup_bytes"] = ideal;
  report.data["held_over_dedup"] = held_ratio ? nlohmann::json(*held_ratio) : nlohmann::json();
  if (!held_ratio) {
    report.checks.push_back({"held bytes <= 1.2x deduplicated K/V", Check::Verdict::skip, "no kv_bytes_per_token in the stats"});
  } else {
    report.checks.push_back(make_check("held bytes <= 1.2x deduplicated K/V", *held_ratio <= kTarget,
                                       std::format("{} ({} held, {} deduplicated)", format_ratio(held_ratio), held, ideal)));
  }
  return report;
}

}  // namespace prefixd::bench
