// The control plane's key operations against the real server: set, update (with the thinking
// switch), fork, clear, meta, token_count, TTL, tenants and every error shape. Cell and byte
// figures come from /v1/cache/stats, which counts them from the engine.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json system_and_user(const std::string& question) {
  return json::array({{{"role", "system"}, {"content", "You are a careful assistant for a travel agency. Answer briefly."}},
                      {{"role", "user"}, {"content", question}}});
}

// The control plane's error shape: the stable fields and the OpenAI error object.
void expect_control_error(const JsonReply& reply, int status, const std::string& operation, const std::string& code) {
  EXPECT_EQ(reply.status, status) << reply.raw;
  EXPECT_EQ(reply.body["supported"], false) << reply.raw;
  EXPECT_EQ(reply.body["operation"], operation) << reply.raw;
  EXPECT_EQ(reply.body["code"], code) << reply.raw;
  EXPECT_TRUE(reply.body["capabilities"].is_object()) << reply.raw;
  EXPECT_TRUE(reply.body["error"]["message"].is_string()) << reply.raw;
}

json device_tier(httplib::Client& client) { return get_json(client, "/v1/cache/stats").body["tiers"]["device"]; }

TEST(CacheControl, CapabilitiesDescribeTheModelAndTheServer) {
  ServerProcess trim;
  const auto caps = get_json(*trim.client(), "/v1/cache/capabilities");
  ASSERT_EQ(caps.status, 200) << caps.raw;
  EXPECT_EQ(caps.body["supported"], true);
  EXPECT_EQ(caps.body["operation"], "capabilities");
  EXPECT_EQ(caps.body["mode"], "local_control_plane");
  EXPECT_EQ(caps.body["reuse_mode"], "trim");
  for (const char* op : {"supports_set", "supports_clear", "supports_update", "supports_fork", "supports_prepare_modules",
                         "supports_stats", "supports_ttl"}) {
    EXPECT_EQ(caps.body[op], true) << op;
  }
  EXPECT_EQ(caps.body["supports_save"], false) << "no artifact directory";
  EXPECT_TRUE(caps.body["notes"].is_array());

  // A hybrid model says what its checkpoint lane cannot do.
  ServerProcess hybrid({.model = std::string(PREFIXD_TEST_MODELS_DIR) + "/qwen35-tiny.gguf", .parallel = 1});
  const auto hybrid_caps = get_json(*hybrid.client(), "/v1/cache/capabilities");
  EXPECT_EQ(hybrid_caps.body["reuse_mode"], "checkpoints");
  EXPECT_NE(hybrid_caps.body["notes"].dump().find("cannot be cut back"), std::string::npos) << hybrid_caps.raw;

  ServerProcess off({.extra_args = {"--prompt-cache-enabled", "false"}});
  auto client = off.client();
  const auto none = get_json(*client, "/v1/cache/capabilities");
  EXPECT_EQ(none.body["supported"], false);
  EXPECT_EQ(none.body["mode"], "none");
  expect_control_error(post_json(*client, "/v1/cache/set", {{"key", "k"}}), 501, "set", "prompt_cache_unsupported");
}

TEST(CacheControl, UpdatePrefillsWhatTheNextGenerationFeedsAndTheThinkingSwitchIsPartOfIt) {
  ServerProcess server;
  auto client = server.client();
  ASSERT_EQ(post_json(*client, "/v1/cache/set", {{"key", "agent"}}).status, 200);
  const auto updated = post_json(*client, "/v1/cache/update",
                                 {{"key", "agent"}, {"messages", system_and_user("Which city should I visit in May?")},
                                  {"thinking", true}});
  ASSERT_EQ(updated.status, 200) << updated.raw;
  const int tokens = updated.body["tokens"].get<int>();
  EXPECT_EQ(metric_value(client->Get("/metrics")->body, "prefixd_cache_control_prefill_tokens_total"), tokens);
  EXPECT_EQ(updated.body["fed_tokens"].get<int>(), tokens);
  EXPECT_EQ(updated.body["add_generation_prompt"], true) << "the conversation ends with a user turn";
  EXPECT_EQ(device_tier(*client)["cells"].get<int>(), tokens) << "all of it is cached, nothing generated";

  const json chat{{"messages", system_and_user("Which city should I visit in May?")}, {"max_tokens", 2}};
  json thinking_on = chat;
  thinking_on["thinking"] = true;
  const auto hit = post_json(*client, "/v1/chat/completions", thinking_on);
  ASSERT_EQ(hit.status, 200) << hit.raw;
  EXPECT_EQ(hit.body["usage"]["prompt_tokens"].get<int>(), tokens);
  EXPECT_EQ(hit.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), tokens - 1)
      << "the generation feeds only the one token it must sample from";

  // The same conversation with thinking off: the switch is not part of the namespace, only of the
  // rendering, and this model's template ignores it, so the tokens and their K/V are the same.
  json thinking_off = chat;
  thinking_off["chat_template_kwargs"] = {{"enable_thinking", false}};
  const auto same_tokens = post_json(*client, "/v1/chat/completions", thinking_off);
  EXPECT_EQ(same_tokens.body["usage"]["prompt_tokens"].get<int>(), tokens) << same_tokens.raw;
  EXPECT_EQ(same_tokens.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), tokens - 1) << same_tokens.raw;

  json contradiction = thinking_on;
  contradiction["chat_template_kwargs"] = {{"enable_thinking", false}};
  EXPECT_EQ(post_json(*client, "/v1/chat/completions", contradiction).body["error"]["param"], "thinking");
}

TEST(CacheControl, ForkedKeysDivergeKeepTheirOwnContinuationsAndHoldTheSharedPrefixOnce) {
  // Idle device cells allowed (on the CPU the default is 0: idle entries move to the host tier), so
  // both branches stay in the device tier, where shared cells are counted exactly.
  ServerProcess server({.extra_args = {"--prompt-cache-device-cells", "1024"}});
  auto client = server.client();
  ASSERT_EQ(post_json(*client, "/v1/cache/set", {{"key", "root"}, {"messages", system_and_user("Plan a week in Japan.")}}).status, 200);
  const int shared = post_json(*client, "/v1/cache/token_count", {{"key", "root"}}).body["token_count"].get<int>();
  ASSERT_GT(shared, 0);
  const auto forked = post_json(*client, "/v1/cache/fork", {{"from_key", "root"}, {"to_key", "branch"}});
  ASSERT_EQ(forked.status, 200) << forked.raw;
  EXPECT_EQ(forked.body["shared_tokens"].get<int>(), shared);
  EXPECT_EQ(device_tier(*client)["cells"].get<int>(), shared) << "a fork copies nothing";

  const auto a = post_json(*client, "/v1/cache/update",
                           {{"key", "root"}, {"messages", json::array({{{"role", "assistant"}, {"content", "Tokyo, then Kyoto."}},
                                                                       {{"role", "user"}, {"content", "Add Osaka."}}})}});
  const auto b = post_json(*client, "/v1/cache/update",
                           {{"key", "branch"},
                            {"messages", json::array({{{"role", "assistant"}, {"content", "Hokkaido in winter, for skiing."}},
                                                      {{"role", "user"}, {"content", "Which resort?"}}})}});
  ASSERT_EQ(a.status, 200) << a.raw;
  ASSERT_EQ(b.status, 200) << b.raw;
  const int a_tokens = a.body["tokens"].get<int>();
  const int b_tokens = b.body["tokens"].get<int>();
  EXPECT_GE(b.body["cached_tokens"].get<int>(), shared) << "the branch reused the root's prefix";
  EXPECT_EQ(post_json(*client, "/v1/cache/token_count", {{"key", "root"}}).body["token_count"].get<int>(), a_tokens);
  EXPECT_EQ(post_json(*client, "/v1/cache/token_count", {{"key", "branch"}}).body["token_count"].get<int>(), b_tokens);
  // Both continuations diverge after the assistant turn opener that ends the shared prompt.
  const json device = device_tier(*client);
  const int common = a_tokens + b_tokens - device["cells"].get<int>();
  EXPECT_GE(common, shared) << "the shared prefix is held once";
  EXPECT_LT(common, std::min(a_tokens, b_tokens));
  const auto bytes_before = device["bytes"].get<std::uint64_t>();

  // Clearing the branch frees exactly what it alone held; the root keeps its whole path.
  const auto cleared = post_json(*client, "/v1/cache/clear", {{"key", "branch"}});
  ASSERT_EQ(cleared.status, 200) << cleared.raw;
  const json after = device_tier(*client);
  EXPECT_EQ(after["cells"].get<int>(), a_tokens);
  EXPECT_EQ(bytes_before - after["bytes"].get<std::uint64_t>(), cleared.body["bytes_freed"].get<std::uint64_t>());
  EXPECT_GT(cleared.body["bytes_freed"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(post_json(*client, "/v1/cache/token_count", {{"key", "root"}}).body["token_count"].get<int>(), a_tokens);
  expect_control_error(post_json(*client, "/v1/cache/token_count", {{"key", "branch"}}), 404, "token_count",
                       "prompt_cache_error");

  // Clearing every key frees the rest.
  ASSERT_EQ(post_json(*client, "/v1/cache/clear", json::object()).status, 200);
  EXPECT_EQ(device_tier(*client)["cells"].get<int>(), 0);
  EXPECT_EQ(get_json(*client, "/v1/cache/stats").body["keys"].get<int>(), 0);
}

TEST(CacheControl, MetaMergesAndAppearsInStats) {
  ServerProcess server;
  auto client = server.client();
  ASSERT_EQ(post_json(*client, "/v1/cache/set", {{"key", "run-7"}, {"meta", {{"workflow", "triage"}, {"step", 1}}}}).status, 200);
  const auto merged = post_json(*client, "/v1/cache/meta", {{"key", "run-7"}, {"meta", {{"step", 2}, {"workflow", nullptr}, {"owner", "ana"}}}});
  ASSERT_EQ(merged.status, 200) << merged.raw;
  EXPECT_EQ(merged.body["meta"], json({{"step", 2}, {"owner", "ana"}}));
  EXPECT_EQ(get_json(*client, "/v1/cache/meta?key=run-7").body["meta"], json({{"step", 2}, {"owner", "ana"}}));
  const auto stats = get_json(*client, "/v1/cache/stats").body;
  EXPECT_EQ(stats["keys"].get<int>(), 1);
  EXPECT_EQ(stats["meta_by_key"]["run-7"]["owner"], "ana");
  EXPECT_EQ(get_json(*client, "/v1/cache/meta?key=nobody").status, 404);

  // /metrics agrees with the replies and the stats.
  const std::string metrics = client->Get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "prefixd_cache_control_keys"), 1);
  EXPECT_EQ(metric_value(metrics, R"(prefixd_cache_control_operations_total{operation="set",result="ok"})"), 1);
  EXPECT_EQ(metric_value(metrics, R"(prefixd_cache_control_operations_total{operation="meta",result="ok"})"), 2);
  EXPECT_EQ(metric_value(metrics, R"(prefixd_cache_control_operations_total{operation="meta",result="error"})"), 1);
  EXPECT_EQ(metric_value(metrics, "prefixd_cache_control_prefill_tokens_total"), 0) << "nothing was prefilled";
}

TEST(CacheControl, EveryBadInputHasAStableErrorShape) {
  ServerProcess server;
  auto client = server.client();
  expect_control_error(post_json(*client, "/v1/cache/update", {{"key", "nobody"}, {"messages", system_and_user("hi")}}), 404,
                       "update", "prompt_cache_error");
  const auto missing_field = post_json(*client, "/v1/cache/set", json::object());
  expect_control_error(missing_field, 400, "set", "prompt_cache_error");
  EXPECT_EQ(missing_field.body["param"], "key");
  expect_control_error(post_json(*client, "/v1/cache/set", {{"key", "k"}, {"ttl_seconds", -5}}), 400, "set", "prompt_cache_error");
  expect_control_error(post_json(*client, "/v1/cache/set", {{"key", std::string(300, 'x')}}), 400, "set", "prompt_cache_error");
  ASSERT_EQ(post_json(*client, "/v1/cache/set", {{"key", "k"}}).status, 200);
  const auto exists = post_json(*client, "/v1/cache/set", {{"key", "k"}});
  expect_control_error(exists, 409, "set", "prompt_cache_error");
  EXPECT_EQ(exists.body["reason"], "key_exists");
  EXPECT_EQ(post_json(*client, "/v1/cache/set", {{"key", "k"}, {"replace", true}}).status, 200);
  const auto bad_message = post_json(*client, "/v1/cache/update",
                                     {{"key", "k"}, {"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}});
  expect_control_error(bad_message, 400, "update", "prompt_cache_error");
  EXPECT_EQ(bad_message.body["param"], "messages[0].role");
  expect_control_error(post_json(*client, "/v1/cache/update", {{"key", "k"}}), 400, "update", "prompt_cache_error");
  expect_control_error(post_json(*client, "/v1/cache/set", {{"key", "refused"}, {"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}),
                       400, "set", "prompt_cache_error");
  EXPECT_EQ(get_json(*client, "/v1/cache/meta?key=refused").status, 404) << "a refused set creates nothing";
  expect_control_error(post_json(*client, "/v1/cache/fork", {{"from_key", "k"}, {"to_key", "k"}}), 409, "fork", "prompt_cache_error");
  expect_control_error(post_json(*client, "/v1/cache/clear", {{"key", "ghost"}}), 404, "clear", "prompt_cache_error");
  expect_control_error(post_json(*client, "/v1/cache/save", {{"name", "x"}, {"key", "k"}}), 501, "save", "prompt_cache_unsupported");
  const auto not_json = client->Post("/v1/cache/set", "{", "application/json");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  EXPECT_EQ(json::parse(not_json->body)["code"], "prompt_cache_error");
  const auto wrong_method = client->Get("/v1/cache/set");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->get_header_value("Allow"), "POST");
  EXPECT_EQ(client->Get("/v1/cache/nothing-here")->status, 404);
}

TEST(CacheControl, AKeyPastItsTtlIsClearedWithItsKv) {
  ServerProcess server;
  auto client = server.client();
  ASSERT_EQ(post_json(*client, "/v1/cache/set", {{"key", "short"}, {"ttl_seconds", 1}, {"messages", system_and_user("Quick one.")}}).status,
            200);
  ASSERT_GT(device_tier(*client)["cells"].get<int>(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  expect_control_error(get_json(*client, "/v1/cache/token_count?key=short"), 404, "token_count", "prompt_cache_error");
  EXPECT_EQ(device_tier(*client)["cells"].get<int>(), 0) << "its K/V went with it";
}

TEST(CacheControl, ATenantSteersOnlyItsOwnKeys) {
  const fs::path dir = fs::temp_directory_path() / ("prefixd-control-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path keys = dir / "keys";
  std::ofstream(keys) << "alpha-key alpha\nbeta-key beta\nroot-key ops admin\n";
  {
    ServerProcess server({.extra_args = {"--api-keys", keys.string()}});
    auto alpha = server.client("alpha-key");
    auto beta = server.client("beta-key");
    auto admin = server.client("root-key");
    ASSERT_EQ(post_json(*alpha, "/v1/cache/set", {{"key", "plan"}, {"messages", system_and_user("Secret plan.")}}).status, 200);
    expect_control_error(post_json(*beta, "/v1/cache/token_count", {{"key", "plan"}}), 404, "token_count", "prompt_cache_error");
    expect_control_error(post_json(*beta, "/v1/cache/clear", {{"key", "plan"}}), 404, "clear", "prompt_cache_error");
    expect_control_error(post_json(*beta, "/v1/cache/clear", {{"key", "plan"}, {"tenant", "alpha"}}), 403, "clear",
                         "prompt_cache_error");
    ASSERT_EQ(post_json(*beta, "/v1/cache/set", {{"key", "plan"}}).status, 200) << "the same name in another tenant is another key";
    EXPECT_GT(post_json(*alpha, "/v1/cache/token_count", {{"key", "plan"}}).body["token_count"].get<int>(), 0);
    EXPECT_EQ(get_json(*beta, "/v1/cache/stats").body["keys"].get<int>(), 1);
    EXPECT_EQ(post_json(*admin, "/v1/cache/clear", {{"key", "plan"}, {"tenant", "alpha"}}).status, 200);
    expect_control_error(post_json(*alpha, "/v1/cache/token_count", {{"key", "plan"}}), 404, "token_count", "prompt_cache_error");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace prefixd::testing
