// Speculative decoding through the real server: n-gram drafts (from a request's own tokens and from
// the replies its namespace produced) and a draft model's guesses change how many tokens a step
// yields, never which tokens.
// Each reply is compared with the same request sent with `speculative.n_max: 0` (no drafts) to the
// same server, and the tests assert that drafts were both accepted and rejected, so that the
// rollback of rejected cells is reached, not only the happy path.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

// Text whose words repeat with a period that depends on `k`: prompt lookup finds matches in it, and
// the model's continuation follows them only sometimes.
std::string repeating_text(int k, int words) {
  static const std::vector<std::string> kWords = {"the",  "quick", "brown", "fox",  "jumps",  "over", "the",
                                                  "lazy", "dog",   "and",   "then", "runs",   "away", "into",
                                                  "the",  "forest", "where", "it",  "meets",  "a",    "bear"};
  std::string text;
  for (int i = 0; i < words; ++i) text += (i > 0 ? " " : "") + kWords[static_cast<size_t>(i * (k + 3)) % kWords.size()];
  return text;
}

std::string test_model(const std::string& name) { return std::string(PREFIXD_TEST_MODELS_DIR) + "/" + name + ".gguf"; }

struct Drafts {
  long drafted = 0;
  long accepted = 0;
  void add(const json& reply) {
    ASSERT_TRUE(reply["timings"].contains("draft_n")) << reply.dump();
    drafted += reply["timings"]["draft_n"].get<long>();
    accepted += reply["timings"]["draft_n_accepted"].get<long>();
  }
};

// The reply's text, and that the same body without drafts gives the same one.
std::string same_without_drafts(httplib::Client& client, const std::string& path, json body, Drafts& drafts,
                                const std::string& what) {
  json plain = body;
  plain["speculative.n_max"] = 0;
  const JsonReply reference = post_json(client, path, plain);
  EXPECT_EQ(reference.status, 200) << reference.raw;
  EXPECT_FALSE(reference.body["timings"].contains("draft_n")) << "n_max 0 turns drafting off: " << reference.raw;
  const JsonReply drafted = post_json(client, path, body);
  EXPECT_EQ(drafted.status, 200) << drafted.raw;
  if (reference.status != 200 || drafted.status != 200) return {};
  drafts.add(drafted.body);
  // Tool call ids are drawn per reply.
  json a = reference.body["choices"][0];
  json b = drafted.body["choices"][0];
  for (json* choice : {&a, &b}) {
    if (!choice->contains("message") || !(*choice)["message"].contains("tool_calls")) continue;
    for (json& call : (*choice)["message"]["tool_calls"]) call.erase("id");
  }
  EXPECT_EQ(a, b) << what << "\nwithout drafts: " << reference.raw << "\nwith drafts: " << drafted.raw;
  return b.contains("text") ? b["text"].get<std::string>() : b["message"].dump();
}

// Greedy replies over prompts of 300 to 1,800 tokens (past the 512 cells where a lone decode row
// takes other kernels than a row-wise call), with drafts from the prompt itself (cache_prompt:
// false: nothing read from or left to the pool) and from the pool (a regenerated request).
TEST(Speculation, GreedyRepliesEqualThoseWithoutDraftsUnderDeterministic) {
  ServerProcess server({.extra_args = {"--spec-type", "ngram", "--draft-when", "always", "--deterministic"}, .ctx_size = 4096});
  EXPECT_NE(server.log().find("speculation: n-gram drafts of 2 to 16 tokens (every guess)"), std::string::npos) << server.log();
  auto client = server.client();
  Drafts lookup;
  for (int k = 0; k < 6; ++k) {
    const json body = {{"prompt", repeating_text(k, 300 + 150 * k)}, {"temperature", 0}, {"max_tokens", 96},
                       {"cache_prompt", false}};
    same_without_drafts(*client, "/v1/completions", body, lookup, "prompt lookup, k = " + std::to_string(k));
  }
  EXPECT_GT(lookup.accepted, 0) << "no draft from the prompt was accepted";
  EXPECT_GT(lookup.drafted, lookup.accepted) << "no draft was rejected: the rollback was not reached";

  // A chat regenerated: the second reply drafts the first one from the pool, whole.
  const json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me about the sea."}}})},
                     {"temperature", 0}, {"max_tokens", 80}, {"ignore_eos", true}};
  Drafts pool;
  same_without_drafts(*client, "/v1/chat/completions", chat, pool, "regenerated chat");
  EXPECT_GE(pool.accepted, 60) << "the regenerated reply did not draft the first one";

  // The counts agree with /metrics.
  const JsonReply m = get_json(*client, "/metrics");
  const std::string metrics = m.raw;
  EXPECT_EQ(metric_value(metrics, "prefixd_draft_tokens_total"), static_cast<double>(lookup.drafted + pool.drafted));
  EXPECT_EQ(metric_value(metrics, "prefixd_draft_tokens_accepted_total"),
            static_cast<double>(lookup.accepted + pool.accepted));
  EXPECT_GT(metric_value(metrics, "prefixd_draft_accepted_tokens_count"), 0) << metrics;
  EXPECT_GT(metric_value(metrics, "prefixd_draft_pool_entries"), 0) << metrics;
}

// At temperature > 0 the request draws each token from its own row with its own seeded sampler,
// once per token, drafts or not: the same seed gives the same reply. A regenerated request drafts
// its first reply (all accepted); drafts from the prompt's repetitions are mostly left by the draws.
TEST(Speculation, SeededSamplingDrawsTheSameTokens) {
  ServerProcess server({.extra_args = {"--spec-type", "ngram", "--draft-when", "always", "--deterministic"}});
  auto client = server.client();
  Drafts drafts;
  for (int seed : {11, 12}) {
    const std::string tag = "seed " + std::to_string(seed);
    const json lookup = {{"prompt", repeating_text(seed, 200)}, {"temperature", 0.3}, {"seed", seed},
                         {"max_tokens", 96}, {"ignore_eos", true}, {"cache_prompt", false}};
    same_without_drafts(*client, "/v1/completions", lookup, drafts, tag + ", prompt lookup");
    const json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Write a poem about rain."}}})},
                       {"temperature", 0.9}, {"seed", seed}, {"max_tokens", 64}, {"ignore_eos", true}};
    same_without_drafts(*client, "/v1/chat/completions", chat, drafts, tag + ", regenerated");
  }
  EXPECT_GT(drafts.accepted, 0);
  EXPECT_GT(drafts.drafted, drafts.accepted);
}

// Four requests decode at once, each drafting its earlier reply: their rows (17 each at most) are
// split over two row-wise calls of at most 63, and every count agrees with /metrics.
TEST(Speculation, ConcurrentRequestsShareTheVerifyCalls) {
  ServerProcess server({.extra_args = {"--spec-type", "ngram", "--draft-when", "always"}, .parallel = 4});
  auto client = server.client();
  std::vector<json> bodies;
  Drafts first;  // the first replies draft from their own tokens only
  for (int i = 0; i < 4; ++i) {
    bodies.push_back({{"messages", json::array({{{"role", "user"}, {"content", "Story number " + std::to_string(i)}}})},
                      {"temperature", 0}, {"max_tokens", 64}, {"ignore_eos", true}});
    const JsonReply reply = post_json(*client, "/v1/chat/completions", bodies.back());
    ASSERT_EQ(reply.status, 200) << reply.raw;
    first.add(reply.body);
  }
  std::vector<std::future<JsonReply>> replies;
  for (const json& body : bodies) {
    replies.push_back(std::async(std::launch::async, [&server, body] {
      auto own = server.client();
      return post_json(*own, "/v1/chat/completions", body);
    }));
  }
  Drafts drafts;
  for (auto& f : replies) {
    const JsonReply reply = f.get();
    ASSERT_EQ(reply.status, 200) << reply.raw;
    EXPECT_EQ(reply.body["usage"]["completion_tokens"], 64) << reply.raw;
    drafts.add(reply.body);
  }
  EXPECT_GT(drafts.accepted, 64) << "the regenerated replies did not draft the earlier ones";
  const std::string metrics = get_json(*client, "/metrics").raw;
  EXPECT_EQ(metric_value(metrics, "prefixd_draft_tokens_total"), static_cast<double>(first.drafted + drafts.drafted));
  EXPECT_EQ(metric_value(metrics, "prefixd_draft_tokens_accepted_total"),
            static_cast<double>(first.accepted + drafts.accepted));
}

// Grammars apply to every verified token: a schema-bound reply and a forced tool call come out as
// without drafts, and the regenerated ones draft their first version.
TEST(Speculation, SchemasAndToolCallsKeepTheirOutputWithDrafts) {
  ServerProcess server({.extra_args = {"--spec-type", "ngram", "--draft-when", "always", "--deterministic"}});
  auto client = server.client();
  const json schema = json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 10}, "size": {"type": "integer", "minimum": 0, "maximum": 99}},
      "required": ["name", "size"], "additionalProperties": false})");
  const json structured = {{"messages", json::array({{{"role", "user"}, {"content", "Describe a box."}}})},
                           {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "box"}, {"schema", schema}}}}},
                           {"temperature", 0}, {"max_tokens", 60}};
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {
      "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                       "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "days"], "additionalProperties": false}}}])");
  const json call = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Oslo?"}}})},
                     {"tools", tools}, {"tool_choice", "required"}, {"parallel_tool_calls", false},
                     {"temperature", 0}, {"max_tokens", 60}};
  Drafts drafts;
  for (int round = 0; round < 2; ++round) {
    const std::string text = same_without_drafts(*client, "/v1/chat/completions", structured, drafts, "schema");
    EXPECT_NE(text.find("size"), std::string::npos) << text;
    same_without_drafts(*client, "/v1/chat/completions", call, drafts, "tool call");
  }
  // Drafted, though under a grammar a draw the grammar refuses ends its step's verification: the
  // token then comes from the masked draw off the engine's thread, after the draft rows are gone.
  EXPECT_GT(drafts.drafted, 0);
}

// Sliding-window models draft too: their drafts' rows never take a window cell the positions
// before them attend to, so cutting a rejected draft leaves the window whole. gemma3-tiny's window
// is 64 tokens, crossed many times by these prompts and replies, with the window cache full
// (every cell kept) and window-only; gemma2's and gpt-oss's from llama.cpp's generator too.
TEST(Speculation, SlidingWindowRepliesEqualThoseWithoutDrafts) {
  struct Case {
    const char* model;
    const char* swa_full;
  };
  for (const Case& c : {Case{"gemma3-tiny.gguf", "on"}, Case{"gemma3-tiny.gguf", "off"},
                        Case{"archs/gemma2-dense.gguf", "off"}, Case{"archs/gpt-oss-moe.gguf", "off"}}) {
    const std::string what = std::string(c.model) + " --swa-full " + c.swa_full;
    ServerProcess server({.model = std::string(PREFIXD_TEST_MODELS_DIR) + "/" + c.model,
                          .extra_args = {"--spec-type", "ngram", "--draft-when", "always", "--deterministic", "--swa-full", c.swa_full},
                          .parallel = 2});
    ASSERT_NE(server.log().find("speculation: n-gram drafts"), std::string::npos) << what << "\n" << server.log();
    auto client = server.client();
    Drafts drafts;
    for (int k = 0; k < 3; ++k) {
      const json lookup = {{"prompt", repeating_text(k, 150 + 100 * k)}, {"temperature", 0}, {"max_tokens", 80},
                           {"cache_prompt", false}};
      same_without_drafts(*client, "/v1/completions", lookup, drafts, what + ", prompt lookup " + std::to_string(k));
      const json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Story " + std::to_string(k)}}})},
                         {"temperature", 0}, {"max_tokens", 80}, {"ignore_eos", true}};
      same_without_drafts(*client, "/v1/chat/completions", chat, drafts, what + ", regenerated " + std::to_string(k));
      // Sampled, drafting from the reply's own repetitions: the draws leave many guesses.
      const json sampled = {{"prompt", repeating_text(k + 5, 120)}, {"temperature", 0.5}, {"seed", k},
                            {"max_tokens", 96}, {"ignore_eos", true}, {"cache_prompt", false}};
      same_without_drafts(*client, "/v1/completions", sampled, drafts, what + ", sampled " + std::to_string(k));
    }
    EXPECT_GT(drafts.accepted, 80) << what;
    EXPECT_GT(drafts.drafted, drafts.accepted) << what << ": no draft was rejected";
  }
}

// Recurrent and hybrid models have consumed a whole draft into their state: a rejected one is rolled
// back by restoring the state saved before its call and computing the tokens taken again. Replies
// equal those without drafts, and the state a drafted reply leaves to the cache is the right one.
TEST(Speculation, RecurrentAndHybridModelsRollBackToTheStateBeforeTheDraft) {
  for (const char* model : {"mamba2-tiny", "archs/jamba-dense", "archs/falcon-h1-dense"}) {
    const std::vector<std::string> flags = {"--spec-type", "ngram", "--draft-when", "always", "--deterministic"};
    ServerProcess server({.model = test_model(model), .extra_args = flags, .parallel = 2});
    EXPECT_EQ(server.log().find("speculation: off"), std::string::npos) << model << "\n" << server.log();
    ServerProcess plain({.model = test_model(model), .extra_args = {"--deterministic"}, .parallel = 2});
    auto client = server.client();
    auto plain_client = plain.client();
    Drafts drafts;
    for (int k = 0; k < 2; ++k) {
      const json body = {{"prompt", repeating_text(k, 200 + 100 * k)}, {"temperature", 0}, {"max_tokens", 48},
                         {"ignore_eos", true}};
      same_without_drafts(*client, "/v1/completions", body, drafts, std::string(model) + ", k = " + std::to_string(k));
    }
    // A chat answered greedily, then sampled with seeds: each draft repeats the replies before it
    // (the pool), which a sampled reply follows for a while and then leaves, so guesses are
    // rejected and states rolled back in the middle of replies. Each reply equals the same request
    // on a server that never drafts.
    json turn = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me about the river."}}})},
                 {"temperature", 0}, {"max_tokens", 40}, {"ignore_eos", true}};
    for (int seed : {0, 1, 2, 3, 4}) {
      if (seed > 0) turn["temperature"] = 0.6;
      turn["seed"] = seed;
      const JsonReply reply = post_json(*client, "/v1/chat/completions", turn);
      const JsonReply reference = post_json(*plain_client, "/v1/chat/completions", turn);
      ASSERT_EQ(reply.status, 200) << reply.raw;
      ASSERT_EQ(reference.status, 200) << reference.raw;
      drafts.add(reply.body);
      EXPECT_EQ(reply.body["choices"][0]["message"], reference.body["choices"][0]["message"]) << model << ", seed " << seed;
    }
    EXPECT_GT(drafts.accepted, 0) << model;
    EXPECT_GT(drafts.drafted, drafts.accepted) << model << ": no draft was rejected, no state was rolled back";
  }
}

// Gated delta-net layers compute a verify call's tokens as one chunk: no drafts there.
TEST(Speculation, IsOffWhereRecurrenceIsComputedInChunks) {
  ServerProcess server({.model = test_model("qwen35-tiny"), .extra_args = {"--spec-type", "ngram"}, .parallel = 2});
  EXPECT_NE(server.log().find("speculation: off for this qwen35 model"), std::string::npos) << server.log();
  auto client = server.client();
  const JsonReply reply = post_json(*client, "/v1/completions",
                                    {{"prompt", repeating_text(1, 200)}, {"temperature", 0}, {"max_tokens", 16}});
  ASSERT_EQ(reply.status, 200) << reply.raw;
  EXPECT_FALSE(reply.body["timings"].contains("draft_n")) << reply.raw;
}

// A draft model (the tiny model's first block alone) guesses the tiny model's tokens partly right:
// greedy and seeded replies equal those without drafts, both accepted and rejected guesses are
// reached, and a prompt the drafter read before comes from its own cache. The counts in the
// replies, /v1/cache/stats and /metrics agree.
TEST(Speculation, ADraftModelsRepliesEqualThoseWithoutDrafts) {
  ServerProcess server({.extra_args = {"--model-draft", test_model("tiny-first-block"), "--draft-when", "always",
                                       "--draft-p-min", "0", "--deterministic"},
                        .ctx_size = 4096});
  EXPECT_NE(server.log().find("speculation: draft model qwen2 guesses 2 to 16 tokens (every guess)"), std::string::npos)
      << server.log();
  auto client = server.client();
  Drafts drafts;
  for (int k = 0; k < 4; ++k) {
    const json body = {{"prompt", repeating_text(k, 200 + 200 * k)}, {"temperature", 0}, {"max_tokens", 64},
                       {"ignore_eos", true}};
    same_without_drafts(*client, "/v1/completions", body, drafts, "greedy, k = " + std::to_string(k));
  }
  for (int seed : {3, 4}) {
    const json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Write a poem about snow."}}})},
                       {"temperature", 0.8}, {"seed", seed}, {"max_tokens", 48}, {"ignore_eos", true}};
    same_without_drafts(*client, "/v1/chat/completions", chat, drafts, "seed " + std::to_string(seed));
  }
  EXPECT_GT(drafts.accepted, 0) << "no guess of the draft model was accepted";
  EXPECT_GT(drafts.drafted, drafts.accepted) << "no guess was rejected: the rollback was not reached";

  // The same prompt again: the drafter's cache holds it, so it computes almost none of it.
  const json body = {{"prompt", repeating_text(7, 500)}, {"temperature", 0}, {"max_tokens", 24}};
  const JsonReply cold = post_json(*client, "/v1/completions", body);
  // Earlier requests may have reused from the drafter's cache too (the chats above share their
  // template's first tokens): what the stats gain with the warm request is what it reused.
  const JsonReply before = get_json(*client, "/v1/cache/stats");
  ASSERT_EQ(before.status, 200) << before.raw;
  const JsonReply warm = post_json(*client, "/v1/completions", body);
  ASSERT_EQ(cold.status, 200) << cold.raw;
  ASSERT_EQ(warm.status, 200) << warm.raw;
  const json& cold_draft = cold.body["prompt_cache"]["draft"];
  const json& warm_draft = warm.body["prompt_cache"]["draft"];
  ASSERT_TRUE(cold_draft.is_object()) << cold.raw;
  ASSERT_TRUE(warm_draft.is_object()) << warm.raw;
  EXPECT_EQ(cold_draft["cached_tokens"], 0) << cold.raw;
  // The drafter reads the prompt and the first token, so the whole prompt can come from its cache;
  // what it reused and computed of the prompt adds up to the prompt.
  const long prompt = warm.body["usage"]["prompt_tokens"].get<long>();
  EXPECT_EQ(cold_draft["fed_tokens"].get<long>(), prompt) << cold.raw;
  EXPECT_EQ(warm_draft["cached_tokens"].get<long>(), prompt) << warm.raw;
  EXPECT_EQ(warm_draft["fed_tokens"].get<long>(), 0) << warm.raw;
  EXPECT_EQ(warm.body["choices"][0]["text"], cold.body["choices"][0]["text"]);
  const JsonReply stats = get_json(*client, "/v1/cache/stats");
  ASSERT_EQ(stats.status, 200) << stats.raw;
  EXPECT_EQ(stats.body["draft"]["tokens_reused"].get<long>() - before.body["draft"]["tokens_reused"].get<long>(),
            warm_draft["cached_tokens"].get<long>())
      << stats.raw;
  EXPECT_GE(stats.body["draft"]["hits"].get<long>(), 1) << stats.raw;
  EXPECT_GT(stats.body["draft"]["device_cells"].get<long>(), 0) << stats.raw;
  const std::string metrics = get_json(*client, "/metrics").raw;
  EXPECT_EQ(metric_value(metrics, "prefixd_draft_cache_tokens_reused_total"),
            stats.body["draft"]["tokens_reused"].get<double>());
  EXPECT_EQ(metric_value(metrics, "prefixd_draft_cache_device_cells"), stats.body["draft"]["device_cells"].get<double>());
  EXPECT_EQ(metric_value(metrics, "prefixd_draft_tokens_total"),
            static_cast<double>(drafts.drafted + cold.body["timings"]["draft_n"].get<long>() +
                                warm.body["timings"]["draft_n"].get<long>()));
}

// A target whose second block adds nothing computes what its first block alone does: the drafter
// made of that block guesses nearly every token, under the default paying policy too once the
// guesses prove right, and concurrent requests share its calls.
TEST(Speculation, ADraftModelThatAgreesIsAcceptedNearlyWhole) {
  ServerProcess server({.model = test_model("tiny-inert-second"),
                        .extra_args = {"--model-draft", test_model("tiny-first-block"), "--draft-when", "always",
                                       "--draft-p-min", "0"},
                        .parallel = 3});
  auto client = server.client();
  std::vector<std::future<JsonReply>> replies;
  for (int i = 0; i < 3; ++i) {
    replies.push_back(std::async(std::launch::async, [&server, i] {
      auto own = server.client();
      return post_json(*own, "/v1/completions",
                       {{"prompt", repeating_text(i, 150)}, {"temperature", 0}, {"max_tokens", 96}, {"ignore_eos", true}});
    }));
  }
  Drafts drafts;
  for (auto& f : replies) {
    const JsonReply reply = f.get();
    ASSERT_EQ(reply.status, 200) << reply.raw;
    drafts.add(reply.body);
  }
  EXPECT_GT(drafts.drafted, 3 * 48);
  EXPECT_GE(static_cast<double>(drafts.accepted), 0.9 * static_cast<double>(drafts.drafted))
      << drafts.accepted << " of " << drafts.drafted;
}

// Per-request settings: llama-server's flat keys and an object; bad values are 400s naming the field.
TEST(Speculation, RequestSettingsAreCheckedAndNamed) {
  ServerProcess server({.extra_args = {"--spec-type", "ngram"}});
  auto client = server.client();
  const json base = {{"prompt", repeating_text(2, 120)}, {"temperature", 0}, {"max_tokens", 24}, {"cache_prompt", false}};
  const std::vector<std::pair<json, std::string>> refused = {
      {{{"speculative.n_max", 63}}, "speculative.n_max"},
      {{{"speculative.n_max", -1}}, "speculative.n_max"},
      {{{"speculative.n_min", "2"}}, "speculative.n_min"},
      {{{"speculative.n_max", 2}, {"speculative.n_min", 3}}, "speculative.n_min"},
      {{{"speculative.p_min", 1.5}}, "speculative.p_min"},
      {{{"speculative", 4}}, "speculative"},
      {{{"speculative", {{"n_max", 99}}}}, "speculative.n_max"},
  };
  for (const auto& [fields, param] : refused) {
    json body = base;
    body.update(fields);
    const JsonReply reply = post_json(*client, "/v1/completions", body);
    EXPECT_EQ(reply.status, 400) << fields.dump() << ": " << reply.raw;
    EXPECT_EQ(reply.body["error"]["param"], param) << fields.dump() << ": " << reply.raw;
  }
  // Accepted forms: the object, extra_body, and n_max 0 (no drafts, no counts).
  json as_object = base;
  as_object["speculative"] = {{"n_max", 4}, {"n_min", 1}, {"p_min", 0.5}};
  const JsonReply a = post_json(*client, "/v1/completions", as_object);
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_TRUE(a.body["timings"].contains("draft_n")) << a.raw;
  json in_extra = base;
  in_extra["extra_body"] = {{"speculative.n_max", 0}};
  const JsonReply b = post_json(*client, "/v1/completions", in_extra);
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_FALSE(b.body["timings"].contains("draft_n")) << b.raw;
  EXPECT_EQ(a.body["choices"][0]["text"], b.body["choices"][0]["text"]);
  // Anthropic Messages and Responses read the same fields and report the same counts.
  const json messages = json::array({{{"role", "user"}, {"content", repeating_text(3, 60)}}});
  const JsonReply m = post_json(*client, "/v1/messages",
                                {{"model", "tiny"}, {"max_tokens", 16}, {"temperature", 0}, {"messages", messages}});
  ASSERT_EQ(m.status, 200) << m.raw;
  EXPECT_TRUE(m.body["timings"].contains("draft_n_accepted")) << m.raw;
  const JsonReply m_off = post_json(*client, "/v1/messages",
                                    {{"model", "tiny"}, {"max_tokens", 16}, {"temperature", 0}, {"messages", messages},
                                     {"speculative", {{"n_max", 0}}}});
  ASSERT_EQ(m_off.status, 200) << m_off.raw;
  EXPECT_FALSE(m_off.body["timings"].contains("draft_n")) << m_off.raw;
  const JsonReply r = post_json(*client, "/v1/responses",
                                {{"input", repeating_text(3, 60)}, {"max_output_tokens", 16}, {"temperature", 0},
                                 {"speculative.n_max", 99}});
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "speculative.n_max") << r.raw;
}

}  // namespace
}  // namespace prefixd::testing
