// The shared tier through real servers: two prefixd servers and one Valkey (standalone, and a
// three-node cluster), every model family, Valkey killed or hung mid-run, and a tampered value.
#include <gtest/gtest.h>

#include <signal.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "media_requests.h"
#include "server_process.h"
#include "valkey_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kSegment = 256;  // the host tier's grid (default --prompt-cache-host-segment)

std::string long_text(int sentences, const std::string& topic) {
  std::string text;
  for (int i = 0; i < sentences; ++i) {
    text += "Note " + std::to_string(i) + " about " + topic + ": the ledger balances when every entry is checked. ";
  }
  return text;
}

json chat_request(const std::string& user, int max_tokens = 8) {
  return {{"messages", json::array({{{"role", "user"}, {"content", user}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

int cached(const json& reply) { return reply["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); }
int prompt_tokens(const json& reply) { return reply["usage"]["prompt_tokens"].get<int>(); }

json remote_stats(httplib::Client& client) { return get_json(client, "/v1/cache/stats").body["tiers"]["remote"]; }

// Waits until a server's write-behind queue to the shared tier is empty and it wrote something.
void wait_for_writes(httplib::Client& client) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  json remote;
  do {
    remote = remote_stats(client);
    if (remote["queue_bytes"] == 0 && remote["writes"].get<int>() > 0) return;
    std::this_thread::sleep_for(20ms);
  } while (std::chrono::steady_clock::now() < deadline);
  ADD_FAILURE() << "the shared tier's writes did not settle: " << remote.dump();
}

ServerConfig remote_server(const std::vector<std::string>& urls, const std::string& model = PREFIXD_TINY_MODEL,
                           std::vector<std::string> extra = {}) {
  ServerConfig config;
  config.model = model;
  config.ctx_size = 8192;
  for (const std::string& url : urls) {
    config.extra_args.push_back("--cache-remote");
    config.extra_args.push_back(url);
  }
  config.extra_args.insert(config.extra_args.end(), extra.begin(), extra.end());
  return config;
}

class RemoteTier : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_program("valkey-server")) GTEST_SKIP() << "valkey-server is not on PATH (run through scripts/in-env)";
  }
};

// A prompt computed on A is reused on B from the shared tier: every whole grid segment and the
// tail, with the same greedy output as A's cold run; stats, metrics and the response agree.
void expect_shared_between_two_servers(const std::vector<std::string>& urls, const std::string& model) {
  ServerProcess a(remote_server(urls, model));
  ServerProcess b(remote_server(urls, model));
  auto ca = a.client();
  auto cb = b.client();
  const json request = chat_request(long_text(70, "inventory"));
  const json cold = chat(*ca, request);
  EXPECT_EQ(cached(cold), 0);
  wait_for_writes(*ca);

  const json warm = chat(*cb, request);
  const int n = prompt_tokens(warm);
  ASSERT_GT(n, 4 * kSegment);
  EXPECT_EQ(warm["prompt_cache"]["tier"], "remote") << warm["prompt_cache"].dump();
  EXPECT_EQ(cached(warm), n - 1) << "the whole prompt but the one-token guard";
  EXPECT_EQ(content(warm), content(cold)) << "greedy output from shared K/V equals the cold run's";
  const json stats = remote_stats(*cb);
  EXPECT_EQ(stats["hits"], 1);
  EXPECT_EQ(stats["lookup_hits"], 1);
  EXPECT_EQ(stats["bad_values"], 0);
  EXPECT_GE(stats["promoted"]["segments"].get<int>() + stats["promoted"]["checkpoints"].get<int>(), 1);
  const std::string metrics = cb->Get("/metrics")->body;
  EXPECT_EQ(metric_value(metrics, "prefixd_cache_remote_hits_total"), 1);
  EXPECT_EQ(metric_value(metrics, "prefixd_prompt_cache_prefix_tokens_reused_total"), n - 1);
}

TEST_F(RemoteTier, ALongPromptComputedOnOneServerIsARemoteHitOnAnother) {
  ValkeyProcess valkey(pick_free_port());
  expect_shared_between_two_servers({valkey.url()}, PREFIXD_TINY_MODEL);
}

TEST_F(RemoteTier, EveryModelFamilySharesThroughTheTier) {
  ValkeyProcess valkey(pick_free_port());
  // Hybrid (attention segments and a checkpoint), recurrent (a checkpoint alone) and sliding
  // window (--swa-full auto gives it the full window cache: segments holding every window cell).
  for (const std::string model : {PREFIXD_TEST_MODELS_DIR "/qwen35-tiny.gguf", PREFIXD_TEST_MODELS_DIR "/mamba2-tiny.gguf",
                                  PREFIXD_TEST_MODELS_DIR "/gemma3-tiny.gguf"}) {
    SCOPED_TRACE(model);
    valkey.cli("flushall");
    expect_shared_between_two_servers({valkey.url()}, model);
  }
}

// An image on an M-RoPE model: 600 cells at one position, the text after it 30 positions on. The
// shared tier's values carry where the image sits, so B resumes the text after it as A computed it.
TEST_F(RemoteTier, AnImagePrefixOnAnMRopeModelIsSharedExactly) {
  ValkeyProcess valkey(pick_free_port());
  const std::vector<std::string> projector = {"--mmproj", PREFIXD_TEST_MODELS_DIR "/tiny-qwen2vl-mmproj.gguf"};
  ServerProcess a(remote_server({valkey.url()}, PREFIXD_TEST_MODELS_DIR "/tiny-qwen2vl.gguf", projector));
  ServerProcess b(remote_server({valkey.url()}, PREFIXD_TEST_MODELS_DIR "/tiny-qwen2vl.gguf", projector));
  auto ca = a.client();
  auto cb = b.client();
  const json request = {
      {"messages", json::array({{{"role", "user"},
                                 {"content", json::array({{{"type", "text"}, {"text", "What is in this picture?"}},
                                                          {{"type", "image_url"}, {"image_url", {{"url", data_url(bmp(840, 560, 7))}}}},
                                                          {{"type", "text"}, {"text", "Answer in one line."}}})}}})},
      {"max_tokens", 8},
      {"temperature", 0}};
  const json cold = chat(*ca, request);
  wait_for_writes(*ca);
  const json warm = chat(*cb, request);
  const int n = prompt_tokens(warm);
  ASSERT_GT(n, 600);
  EXPECT_EQ(warm["prompt_cache"]["tier"], "remote") << warm["prompt_cache"].dump();
  EXPECT_EQ(cached(warm), n - 1) << warm["prompt_cache"].dump();
  EXPECT_EQ(warm["prompt_cache"]["images"]["encoded"], 0);
  EXPECT_EQ(content(warm), content(cold));
}

TEST_F(RemoteTier, AThreeNodeClusterSharesLikeOneServer) {
  if (!have_program("valkey-cli")) GTEST_SKIP() << "valkey-cli is not on PATH: cannot create a cluster";
  ValkeyCluster cluster(3);
  expect_shared_between_two_servers({cluster.nodes()[0]->url()}, PREFIXD_TINY_MODEL);
  // A few more prompts, so that enough names exist for the slots to reach every node (the names are
  // content hashes: the same every run).
  {
    // Its write-behind queue is written before it exits (SIGTERM).
    ServerProcess more({.extra_args = {"--cache-remote", cluster.nodes()[0]->url()}, .ctx_size = 4096});
    auto client = more.client();
    for (int i = 0; i < 4; ++i) {
      std::string text = "Prompt " + std::to_string(i) + ":";
      for (int w = 0; w < 120; ++w) text += " word" + std::to_string(w * 7 + i);
      const auto reply = post_json(*client, "/v1/completions", {{"prompt", text}, {"max_tokens", 1}});
      ASSERT_EQ(reply.status, 200) << reply.raw;
    }
  }
  int holding = 0;
  for (const auto& node : cluster.nodes()) holding += node->cli("dbsize") != "0\n" ? 1 : 0;
  EXPECT_EQ(holding, 3) << "values spread over every node by slot";
}

// A second turn extends the first: B finds the first turn's segments and its tail.
TEST_F(RemoteTier, ANextTurnOnAnotherServerReusesTheFirstTurnsTail) {
  ValkeyProcess valkey(pick_free_port());
  ServerProcess a(remote_server({valkey.url()}));
  ServerProcess b(remote_server({valkey.url()}));
  auto ca = a.client();
  auto cb = b.client();
  json request = chat_request(long_text(40, "shipping"));
  const json first = chat(*ca, request);
  wait_for_writes(*ca);
  request["messages"].push_back({{"role", "assistant"}, {"content", content(first)}});
  request["messages"].push_back({{"role", "user"}, {"content", "And the returns?"}});
  const json second = chat(*cb, request);
  EXPECT_EQ(second["prompt_cache"]["tier"], "remote");
  // Everything A held of the first turn (its prompt; the reply as A sampled it may differ from
  // its rendering) is reused: past the last whole segment, the tail counts.
  EXPECT_GT(cached(second), prompt_tokens(first) / kSegment * kSegment) << second["usage"].dump();
}

TEST_F(RemoteTier, KillingValkeyMidRunTurnsHitsIntoMissesWithoutFailures) {
  auto valkey = std::make_unique<ValkeyProcess>(pick_free_port());
  const std::string url = valkey->url();
  ServerProcess a(remote_server({url}, PREFIXD_TINY_MODEL, {"--cache-remote-timeout-ms", "200"}));
  ServerProcess b(remote_server({url}, PREFIXD_TINY_MODEL, {"--cache-remote-timeout-ms", "200"}));
  auto ca = a.client();
  auto cb = b.client();
  for (int i = 0; i < 2; ++i) {
    const json request = chat_request(long_text(30, "topic " + std::to_string(i)));
    chat(*ca, request);
    wait_for_writes(*ca);
    EXPECT_EQ(chat(*cb, request)["prompt_cache"]["tier"], "remote");
  }
  valkey->kill_now();
  for (int i = 2; i < 5; ++i) {
    const json request = chat_request(long_text(30, "topic " + std::to_string(i)));
    const auto started = std::chrono::steady_clock::now();
    const json on_a = chat(*ca, request);
    const json on_b = chat(*cb, request);
    EXPECT_EQ(cached(on_b), 0) << "nothing shared once the tier is gone";
    EXPECT_EQ(content(on_a), content(on_b));
    EXPECT_LT(std::chrono::steady_clock::now() - started, 60s);
  }
  const json stats = remote_stats(*cb);
  EXPECT_GT(stats["errors"].get<int>() + stats["lookup_timeouts"].get<int>(), 0) << stats.dump();
  EXPECT_EQ(stats["hits"], 2);
  // Valkey back (empty): sharing resumes once the backoff has passed.
  valkey = std::make_unique<ValkeyProcess>(std::stoi(url.substr(url.rfind(':') + 1)));
  std::this_thread::sleep_for(5500ms);
  const json request = chat_request(long_text(30, "after the restart"));
  const int written = remote_stats(*ca)["writes"].get<int>();
  chat(*ca, request);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (remote_stats(*ca)["writes"].get<int>() == written && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  wait_for_writes(*ca);
  EXPECT_GT(cached(chat(*cb, request)), 0) << "the tier serves again after Valkey came back";
}

TEST_F(RemoteTier, AHungValkeyCostsALookupAtMostItsDeadline) {
  ValkeyProcess valkey(pick_free_port());
  ServerProcess b(remote_server({valkey.url()}, PREFIXD_TINY_MODEL, {"--cache-remote-timeout-ms", "300"}));
  auto cb = b.client();
  chat(*cb, chat_request("connect first"));
  valkey.signal(SIGSTOP);
  const auto started = std::chrono::steady_clock::now();
  const json reply = chat(*cb, chat_request(long_text(30, "hung store"), 1));
  const auto elapsed = std::chrono::steady_clock::now() - started;
  valkey.signal(SIGCONT);
  EXPECT_EQ(cached(reply), 0);
  const json stats = remote_stats(*cb);
  // The lookup's GET timed out (counted as an error) and brought nothing; the request ran cold.
  EXPECT_GE(stats["errors"].get<int>(), 1) << stats.dump();
  EXPECT_EQ(stats["lookup_hits"], 0) << stats.dump();
  // /health never waits for the shared tier.
  EXPECT_LT(elapsed, 30s);
  EXPECT_EQ(cb->Get("/health")->status, 200);
}

TEST_F(RemoteTier, ATamperedValueIsCountedDeletedAndNeverServed) {
  ValkeyProcess valkey(pick_free_port());
  ServerProcess a(remote_server({valkey.url()}));
  ServerProcess b(remote_server({valkey.url()}));
  auto ca = a.client();
  auto cb = b.client();
  const json request = chat_request(long_text(70, "audits"));
  const json cold = chat(*ca, request);
  wait_for_writes(*ca);
  // The third grid segment's value: flip one byte of its payload (its K/V), keeping its length.
  const std::string keys = valkey.cli("--scan --pattern 'prefixd:*:s:*'");
  std::vector<std::string> names;
  for (size_t at = 0; at < keys.size();) {
    const size_t end = keys.find('\n', at);
    names.push_back(keys.substr(at, end - at));
    at = end == std::string::npos ? keys.size() : end + 1;
  }
  ASSERT_GE(names.size(), 4u) << keys;
  // Which segment a name holds is in its value's header: find the one starting at position 512.
  std::string victim;
  for (const std::string& name : names) {
    const std::string begin = valkey.cli("--no-raw getrange " + name + " 144 147");
    if (begin.find("\\x00\\x02\\x00\\x00") != std::string::npos) victim = name;
  }
  ASSERT_FALSE(victim.empty()) << "no segment starts at 512";
  const int length = std::stoi(valkey.cli("strlen " + victim));
  const std::string original = valkey.cli("--no-raw get " + victim);
  valkey.cli("setrange " + victim + " " + std::to_string(length - 7) + " Z");
  const json warm = chat(*cb, request);
  EXPECT_EQ(cached(warm), 2 * kSegment) << "the segments before the damaged one, nothing from it on";
  EXPECT_EQ(content(warm), content(cold));
  const json stats = remote_stats(*cb);
  EXPECT_EQ(stats["bad_values"], 1) << stats.dump();
  EXPECT_NE(valkey.cli("info commandstats").find("cmdstat_del:calls=1,"), std::string::npos) << "deleted once";
  // B computed that segment itself and wrote it back: the tier heals.
  wait_for_writes(*cb);
  EXPECT_EQ(valkey.cli("--no-raw get " + victim), original);
  EXPECT_EQ(metric_value(cb->Get("/metrics")->body, "prefixd_cache_remote_bad_values_total"), 1);
}

// Session isolation holds across servers: another session finds the shared system prompt in the
// tier (its wall segment included) and nothing past it; the same session finds everything.
TEST_F(RemoteTier, SessionIsolationHoldsAcrossServers) {
  ValkeyProcess valkey(pick_free_port());
  std::string system = "You are a meticulous librarian. ";
  for (int i = 0; i < 40; ++i) system += "Rule " + std::to_string(i) + ": catalogue every book by author and year. ";
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("prefixd-remote-shared-" + std::to_string(::getpid()));
  std::ofstream(file) << system;
  const std::vector<std::string> isolation{"--cache-isolation", "session", "--cache-shared-prefix-file", file.string()};
  ServerProcess a(remote_server({valkey.url()}, PREFIXD_TINY_MODEL, isolation));
  ServerProcess b(remote_server({valkey.url()}, PREFIXD_TINY_MODEL, isolation));
  auto ca = a.client();
  auto cb = b.client();
  const auto rendered = post_json(*cb, "/apply-template",
                                  {{"messages", json::array({{{"role", "system"}, {"content", system}}})},
                                   {"add_generation_prompt", false}});
  const auto tokens = post_json(*cb, "/tokenize", {{"content", rendered.body["prompt"]}, {"add_special", true}});
  const auto shared = static_cast<int>(tokens.body["tokens"].size());
  ASSERT_GT(shared, kSegment) << "the wall lies past the first grid segment";
  ASSERT_NE(shared % kSegment, 0) << "and off the grid: the wall segment is shared";
  const auto conversation = [&](const std::string& session) {
    return json{{"messages", json::array({{{"role", "system"}, {"content", system}},
                                          {{"role", "user"}, {"content", long_text(25, "the atlas")}}})},
                {"max_tokens", 2},
                {"temperature", 0},
                {"prompt_cache_key", session}};
  };
  const json alice_on_a = chat(*ca, conversation("alice"));
  wait_for_writes(*ca);
  const json bob_on_b = chat(*cb, conversation("bob"));
  EXPECT_EQ(cached(bob_on_b), shared) << "the shared prefix, to the token, and nothing past it";
  EXPECT_EQ(bob_on_b["prompt_cache"]["tier"], "remote");
  const json alice_on_b = chat(*cb, conversation("alice"));
  // Her own session reaches everything A kept of it but a tail shorter than a block (not shared).
  EXPECT_GT(cached(alice_on_b), prompt_tokens(alice_on_a) - 1 - 16) << alice_on_b["usage"].dump();
  EXPECT_EQ(alice_on_b["prompt_cache"]["tier"], "remote");
  std::filesystem::remove(file);
}

TEST_F(RemoteTier, TenantsNeverShareThroughTheTier) {
  ValkeyProcess valkey(pick_free_port());
  const std::filesystem::path keys =
      std::filesystem::temp_directory_path() / ("prefixd-remote-keys-" + std::to_string(::getpid()));
  std::ofstream(keys) << "key-of-acme-0123456789 acme\nkey-of-globex-012345678 globex\n";
  const std::vector<std::string> tenants{"--api-keys", keys.string()};
  ServerProcess a(remote_server({valkey.url()}, PREFIXD_TINY_MODEL, tenants));
  ServerProcess b(remote_server({valkey.url()}, PREFIXD_TINY_MODEL, tenants));
  auto acme_on_a = a.client("key-of-acme-0123456789");
  auto globex_on_b = b.client("key-of-globex-012345678");
  auto acme_on_b = b.client("key-of-acme-0123456789");
  const json request = chat_request(long_text(40, "quarterly figures"));
  const json first = chat(*acme_on_a, request);
  ASSERT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (valkey.cli("dbsize") == "0\n" && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(cached(chat(*globex_on_b, request)), 0) << "another tenant's names differ: nothing found";
  EXPECT_EQ(cached(chat(*acme_on_b, request)), prompt_tokens(first) - 1);
  std::filesystem::remove(keys);
}

TEST_F(RemoteTier, AnUnusableUrlIsAClearStartupError) {
  const std::string out = run_command(std::string(PREFIXD_BINARY) + " serve --model " + PREFIXD_TINY_MODEL +
                                      " --cache-remote http://nowhere:1 2>&1; echo rc=$?");
  EXPECT_NE(out.find("--cache-remote"), std::string::npos) << out;
  EXPECT_NE(out.find("rc=1"), std::string::npos) << out;
}

}  // namespace
}  // namespace prefixd::testing
