// A Messages cache_control breakpoint keeps its prefix ahead of LRU eviction for its TTL: on a
// host tier that holds about two conversations, a conversation whose system prompt carries a
// breakpoint is still served from cache after three others passed through, where the same
// conversation without one (or beyond the tenant's retention budget) was evicted. What the cache
// reports — the reply's usage, /v1/cache/stats and /metrics — agrees.
#include <gtest/gtest.h>

#include <format>
#include <string>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

// About 105 KB of K/V per conversation on the tiny model (256 bytes a token): two fit in the
// 256 KiB host tier, three do not.
constexpr int kConversationTokens = 400;
const std::string kHostBytes = std::to_string(256 * 1024);

// A system prompt of at least `tokens` tokens, different for each `topic`.
std::string system_prompt(httplib::Client& client, const std::string& topic, int tokens) {
  std::string text = "You answer questions about " + topic + ".";
  for (int i = 0;; ++i) {
    const auto counted = post_json(client, "/tokenize", {{"content", text}});
    if (counted.status != 200) throw std::runtime_error("/tokenize: " + counted.raw);
    if (static_cast<int>(counted.body["tokens"].size()) >= tokens) return text;
    text += std::format(" Rule {} about {}: keep answers short, cite sources, and say when unsure.", i, topic);
  }
}

json request(const std::string& system, bool breakpoint) {
  json block = {{"type", "text"}, {"text", system}};
  if (breakpoint) block["cache_control"] = {{"type", "ephemeral"}, {"ttl", "1h"}};
  return {{"model", "tiny"}, {"max_tokens", 2}, {"temperature", 0}, {"system", json::array({block})},
          {"messages", json::array({{{"role", "user"}, {"content", "What matters most?"}}})}};
}

struct Outcome {
  int created = 0;        // the first request's cache_creation_input_tokens
  int read_again = 0;     // the repeat's cache_read_input_tokens
  json stats;             // /v1/cache/stats after the repeat
  std::string metrics;
};

// Conversation A (with or without a breakpoint), three other conversations, then A again.
Outcome run(const std::vector<std::string>& extra_args, bool breakpoint) {
  ServerConfig config{.extra_args = extra_args, .parallel = 1};
  config.extra_args.insert(config.extra_args.end(), {"--prompt-cache-capacity-bytes", kHostBytes});
  ServerProcess server(config);
  auto client = server.client();
  Outcome out;
  const std::string a = system_prompt(*client, "the weather", kConversationTokens);
  const auto first = post_json(*client, "/v1/messages", request(a, breakpoint));
  EXPECT_EQ(first.status, 200) << first.raw;
  out.created = first.body["usage"]["cache_creation_input_tokens"].get<int>();
  for (const char* topic : {"rivers", "mountains", "deserts"}) {
    const auto other = post_json(*client, "/v1/messages", request(system_prompt(*client, topic, kConversationTokens), false));
    EXPECT_EQ(other.status, 200) << other.raw;
  }
  const auto again = post_json(*client, "/v1/messages", request(a, breakpoint));
  EXPECT_EQ(again.status, 200) << again.raw;
  out.read_again = again.body["usage"]["cache_read_input_tokens"].get<int>();
  out.stats = get_json(*client, "/v1/cache/stats").body;
  out.metrics = get_json(*client, "/metrics").raw;
  return out;
}

TEST(RetainedPrefix, ABreakpointWithATtlOutlivesLruWhereTheSameConversationWithoutOneIsEvicted) {
  const Outcome plain = run({}, /*breakpoint=*/false);
  // The host tier really was too small: without a breakpoint, A was evicted.
  EXPECT_LT(plain.read_again, 32) << plain.stats.dump();
  EXPECT_GT(plain.stats["evictions"]["capacity"].get<int>(), 0) << plain.stats.dump();
  EXPECT_EQ(plain.stats["retained"]["prefixes"], 0);

  const Outcome kept = run({}, /*breakpoint=*/true);
  EXPECT_GE(kept.created, kConversationTokens) << "the system prompt up to its breakpoint";
  EXPECT_GE(kept.read_again, kept.created) << kept.stats.dump();
  EXPECT_GT(kept.stats["evictions"]["capacity"].get<int>(), 0) << "others were evicted instead";
  const json& retained = kept.stats["retained"];
  EXPECT_EQ(retained["prefixes"], 1) << retained.dump();
  EXPECT_EQ(retained["tokens"], kept.created) << retained.dump();
  EXPECT_EQ(retained["added"], 1);
  EXPECT_EQ(retained["renewed"], 1) << "the repeat renewed it";
  EXPECT_EQ(metric_value(kept.metrics, "prefixd_prompt_cache_retained_prefixes"), 1);
  EXPECT_EQ(metric_value(kept.metrics, "prefixd_prompt_cache_retained_tokens"), kept.created);
  EXPECT_EQ(metric_value(kept.metrics, "prefixd_prompt_cache_retentions_total{result=\"renewed\"}"), 1);

  // A tenant budget smaller than the prefix: the ask is refused and A is evicted like any other.
  const Outcome over = run({"--prompt-cache-retain-tokens", "100"}, /*breakpoint=*/true);
  EXPECT_LT(over.read_again, 32) << over.stats.dump();
  EXPECT_EQ(over.stats["retained"]["prefixes"], 0);
  EXPECT_EQ(over.stats["retained"]["refused"], 2);
  EXPECT_EQ(over.stats["retained"]["budget_tokens_per_tenant"], 100);
}

}  // namespace
}  // namespace prefixd::testing
