// The routing endpoints through the real server: GET /v1/cache/summary lists exactly the block
// chain hashes of what the tiers hold (device, host, disk), POST /v1/cache/chain gives a request's
// chain as the server addresses it for its caller, and both are scoped and validated.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "server_process.h"

namespace prefixd::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kAlphaKey = "alpha-key-1";
constexpr const char* kBetaKey = "beta-key-1";
constexpr const char* kAdminKey = "ops-admin-key";

json long_chat(const std::string& topic, const std::string& question) {
  std::string system = "You are a careful " + topic + " assistant. ";
  for (int i = 0; i < 24; ++i) system += "Rule " + std::to_string(i) + " about " + topic + ": answer briefly. ";
  return {{"messages", json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", question}}})},
          {"max_tokens", 2},
          {"temperature", 0}};
}

std::set<std::string> summary_blocks(httplib::Client& client) {
  const JsonReply reply = get_json(client, "/v1/cache/summary");
  EXPECT_EQ(reply.status, 200) << reply.raw;
  std::set<std::string> out;
  for (const auto& block : reply.body.value("blocks", json::array())) out.insert(block.get<std::string>());
  return out;
}

std::vector<std::string> chain_of(httplib::Client& client, const json& request, int* prompt_tokens = nullptr) {
  const JsonReply reply = post_json(client, "/v1/cache/chain", {{"endpoint", "chat"}, {"request", request}});
  EXPECT_EQ(reply.status, 200) << reply.raw;
  if (prompt_tokens != nullptr) *prompt_tokens = reply.body.value("prompt_tokens", -1);
  return reply.body.value("blocks", std::vector<std::string>{});
}

bool holds_all(const std::set<std::string>& summary, const std::vector<std::string>& chain) {
  return std::ranges::all_of(chain, [&](const std::string& block) { return summary.contains(block); });
}

int held_count(const std::set<std::string>& summary, const std::vector<std::string>& chain) {
  return static_cast<int>(std::ranges::count_if(chain, [&](const std::string& block) { return summary.contains(block); }));
}

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("prefixd-summary-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(CacheSummary, ListsEveryBlockOfEachPromptServedAndNothingAfterReset) {
  ServerProcess server;
  auto client = server.client();
  const json first = long_chat("geology", "What is basalt?");
  const json second = long_chat("astronomy", "What is a quasar?");

  int prompt_tokens = 0;
  const std::vector<std::string> chain = chain_of(*client, first, &prompt_tokens);
  ASSERT_GT(prompt_tokens, 200);
  EXPECT_EQ(static_cast<int>(chain.size()), prompt_tokens / 16);
  EXPECT_EQ(held_count(summary_blocks(*client), chain), 0);

  const JsonReply served = post_json(*client, "/v1/chat/completions", first);
  ASSERT_EQ(served.status, 200) << served.raw;
  EXPECT_EQ(served.body["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_TRUE(holds_all(summary_blocks(*client), chain));

  // A second conversation moves the first one off the device (no idle cells on the CPU): the host
  // tier's segments must still name every block of it.
  ASSERT_EQ(post_json(*client, "/v1/chat/completions", second).status, 200);
  const std::set<std::string> both = summary_blocks(*client);
  EXPECT_TRUE(holds_all(both, chain));
  EXPECT_TRUE(holds_all(both, chain_of(*client, second)));
  // Nothing but what was served: a prompt never sent shares only the template's opening blocks.
  const std::vector<std::string> unsent = chain_of(*client, long_chat("botany", "What is a fern?"));
  EXPECT_LT(held_count(both, unsent), 3);

  ASSERT_EQ(post_json(*client, "/v1/cache/reset", json::object()).status, 200);
  EXPECT_TRUE(summary_blocks(*client).empty());
}

TEST(CacheSummary, SinceTheCurrentVersionAnswersUnchanged) {
  ServerProcess server;
  auto client = server.client();
  const JsonReply empty = get_json(*client, "/v1/cache/summary");
  ASSERT_EQ(empty.status, 200) << empty.raw;
  EXPECT_EQ(empty.body["object"], "prefixd.cache_summary");
  EXPECT_EQ(empty.body["format"], 1);
  EXPECT_EQ(empty.body["block_size"], 16);
  EXPECT_EQ(empty.body["hash"], "blake3");
  EXPECT_EQ(empty.body["load"]["slots"], 4);
  EXPECT_EQ(empty.body["server_id"].get<std::string>().size(), 32u);

  ASSERT_EQ(post_json(*client, "/v1/chat/completions", long_chat("geology", "What is basalt?")).status, 200);
  const JsonReply full = get_json(*client, "/v1/cache/summary");
  const auto version = full.body["version"].get<std::uint64_t>();
  EXPECT_NE(version, empty.body["version"].get<std::uint64_t>());
  EXPECT_FALSE(full.body["blocks"].empty());

  const JsonReply same = get_json(*client, "/v1/cache/summary?since=" + std::to_string(version));
  ASSERT_EQ(same.status, 200) << same.raw;
  EXPECT_EQ(same.body["version"], version);
  EXPECT_EQ(same.body.value("unchanged", false), true);
  EXPECT_FALSE(same.body.contains("blocks"));

  const JsonReply old = get_json(*client, "/v1/cache/summary?since=" + std::to_string(version - 1));
  EXPECT_FALSE(old.body.value("unchanged", false));
  EXPECT_EQ(old.body["blocks"], full.body["blocks"]);

  EXPECT_EQ(get_json(*client, "/v1/cache/summary?since=abc").status, 400);
}

TEST(CacheSummary, DiskSegmentsAreListedAfterARestart) {
  const fs::path disk = temp_dir("disk");
  const json request = long_chat("geology", "What is basalt?");
  std::vector<std::string> chain;
  {
    ServerProcess server(ServerConfig{.extra_args = {"--cache-disk-path", disk.string()}});
    auto client = server.client();
    chain = chain_of(*client, request);
    ASSERT_EQ(post_json(*client, "/v1/chat/completions", request).status, 200);
    // The other conversation pushes the first one down; the shutdown writes the queue out.
    ASSERT_EQ(post_json(*client, "/v1/chat/completions", long_chat("astronomy", "What is a quasar?")).status, 200);
  }
  ServerProcess restarted(ServerConfig{.extra_args = {"--cache-disk-path", disk.string()}});
  auto client = restarted.client();
  EXPECT_EQ(chain_of(*client, request), chain);
  EXPECT_TRUE(holds_all(summary_blocks(*client), chain));
  fs::remove_all(disk);
}

TEST(CacheChain, TenantsHaveDifferentChainsAndTheSummaryNeedsAnAdmin) {
  const fs::path dir = temp_dir("keys");
  const fs::path keys = dir / "keys.txt";
  std::ofstream(keys) << kAlphaKey << " alpha\n" << kBetaKey << " beta\n" << kAdminKey << " ops admin\n";
  ServerProcess server(ServerConfig{.extra_args = {"--api-keys", keys.string()}});
  auto alpha = server.client(kAlphaKey);
  auto beta = server.client(kBetaKey);
  auto admin = server.client(kAdminKey);
  const json request = long_chat("geology", "What is basalt?");

  const std::vector<std::string> alpha_chain = chain_of(*alpha, request);
  const std::vector<std::string> beta_chain = chain_of(*beta, request);
  ASSERT_FALSE(alpha_chain.empty());
  ASSERT_EQ(alpha_chain.size(), beta_chain.size());
  EXPECT_NE(alpha_chain.front(), beta_chain.front());
  json salted = request;
  salted["cache_salt"] = "blue";
  EXPECT_NE(chain_of(*alpha, salted).front(), alpha_chain.front());

  ASSERT_EQ(post_json(*alpha, "/v1/chat/completions", request).status, 200);
  const std::set<std::string> held = summary_blocks(*admin);
  EXPECT_TRUE(holds_all(held, alpha_chain));
  EXPECT_EQ(held_count(held, beta_chain), 0);

  EXPECT_EQ(get_json(*alpha, "/v1/cache/summary").status, 403);
  EXPECT_EQ(get_json(*server.client(), "/v1/cache/summary").status, 401);
  EXPECT_EQ(post_json(*server.client(), "/v1/cache/chain", {{"endpoint", "chat"}, {"request", request}}).status, 401);
  fs::remove_all(dir);
}

TEST(CacheChain, BadBodiesGetTheEndpointsOwnErrors) {
  ServerProcess server;
  auto client = server.client();
  EXPECT_EQ(post_json(*client, "/v1/cache/chain", {{"endpoint", "embeddings"}, {"request", json::object()}}).status, 400);
  EXPECT_EQ(post_json(*client, "/v1/cache/chain", {{"endpoint", "chat"}}).status, 400);
  // What the chat endpoint itself refuses: no messages; an unknown model.
  EXPECT_EQ(post_json(*client, "/v1/cache/chain", {{"endpoint", "chat"}, {"request", {{"max_tokens", 2}}}}).status, 400);
  json unknown = long_chat("geology", "What is basalt?");
  unknown["model"] = "no-such-model";
  EXPECT_EQ(post_json(*client, "/v1/cache/chain", {{"endpoint", "chat"}, {"request", unknown}}).status,
            post_json(*client, "/v1/chat/completions", unknown).status);
  const JsonReply completion = post_json(
      *client, "/v1/cache/chain", {{"endpoint", "completions"}, {"request", {{"prompt", std::string(400, 'a')}}}});
  ASSERT_EQ(completion.status, 200) << completion.raw;
  EXPECT_EQ(completion.body["blocks"].size(), completion.body["prompt_tokens"].get<std::size_t>() / 16);
  EXPECT_EQ(get_json(*client, "/v1/cache/chain").status, 405);
}

}  // namespace
}  // namespace prefixd::testing
