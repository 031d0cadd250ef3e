// The remote tier's client against real valkey-server processes: round trips, a dead or hung
// server turning into misses within the timeout, recovery, and a three-node cluster.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "remote/hash_slot.h"
#include "remote/remote_store.h"
#include "server_process.h"
#include "valkey_process.h"

namespace prefixd::remote {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using prefixd::testing::have_program;
using prefixd::testing::ValkeyProcess;

std::unique_ptr<RemoteStore> make_store(RemoteStoreConfig config) {
  auto store = RemoteStore::create(std::move(config));
  if (!store) throw std::runtime_error(store.error());
  return std::move(*store);
}

class RemoteStoreServer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_program("valkey-server")) GTEST_SKIP() << "valkey-server is not on PATH (run through scripts/in-env)";
    server_ = std::make_unique<ValkeyProcess>(prefixd::testing::pick_free_port());
  }
  std::unique_ptr<ValkeyProcess> server_;
};

TEST_F(RemoteStoreServer, SetGetAndGetManyRoundTrip) {
  auto store = make_store({.seed_urls = {server_->url()}, .timeout = 500ms, .key_prefix = "fp1:"});
  const std::string binary("a\0b\xff", 4);
  ASSERT_TRUE(store->set("k1", "value-one"));
  ASSERT_TRUE(store->set("k2", binary));
  EXPECT_EQ(store->get("k1"), "value-one");
  EXPECT_EQ(server_->cli("get fp1:k1"), "value-one\n") << "the key prefix is part of the stored key";
  const std::vector<std::string> keys{"k2", "absent", "k1"};
  const auto values = store->get_many(keys);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[0], binary);
  EXPECT_EQ(values[1], std::nullopt);
  EXPECT_EQ(values[2], "value-one");
  EXPECT_FALSE(store->cluster_enabled());
  EXPECT_TRUE(store->del("k1"));
  EXPECT_EQ(store->get("k1"), std::nullopt);
  const auto counters = store->counters();
  EXPECT_EQ(counters.hits, 3u);
  EXPECT_EQ(counters.misses, 2u);
  EXPECT_EQ(counters.errors, 0u);
  EXPECT_EQ(counters.bytes_read, 2 * 9u + 4u);
  EXPECT_EQ(counters.bytes_written, 9u + 4u);
  EXPECT_EQ(counters.latency_count, 6u);  // two sets, get, get_many, del, get
}

TEST_F(RemoteStoreServer, DeadOrHungServerTurnsIntoMissesWithinTheTimeoutAndRecovers) {
  constexpr auto timeout = 200ms;
  constexpr auto slack = 300ms;  // a loaded machine
  auto store = make_store({.seed_urls = {server_->url()}, .timeout = timeout, .backoff = {.initial = 100ms, .max = 400ms}});
  ASSERT_TRUE(store->set("k", "v"));
  ASSERT_EQ(store->get("k"), "v");

  // Hung: the process is stopped, the socket stays open, nothing answers.
  server_->signal(SIGSTOP);
  auto start = Clock::now();
  EXPECT_EQ(store->get("k"), std::nullopt);
  const auto hung_call = Clock::now() - start;
  std::printf("hung server: get returned a miss after %lld ms (timeout %lld ms)\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(hung_call).count()),
              static_cast<long long>(timeout.count()));
  EXPECT_LT(hung_call, timeout + slack);
  server_->signal(SIGCONT);

  // Dead: every call is a miss (or a failed write), and none waits longer than the timeout.
  server_->kill_now();
  auto worst = Clock::duration::zero();
  for (int i = 0; i < 20; ++i) {
    start = Clock::now();
    EXPECT_EQ(store->get("k"), std::nullopt);
    EXPECT_FALSE(store->set("k", "v"));
    worst = std::max(worst, Clock::now() - start);
    std::this_thread::sleep_for(20ms);
  }
  std::printf("dead server: worst get+set pair %lld us\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(worst).count()));
  EXPECT_LT(worst, 2 * timeout + slack);
  EXPECT_GT(store->counters().errors, 0u);

  // Restarted on the same port (empty: no persistence): the store reconnects by itself.
  server_->start();
  bool recovered = false;
  for (const auto deadline = Clock::now() + 10s; !recovered && Clock::now() < deadline;) {
    recovered = store->set("k", "again") && store->get("k") == "again";
    if (!recovered) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(recovered);
}

TEST(RemoteStoreNoServer, RefusedConnectionIsAMissAndBacksOff) {
  auto store = make_store({.seed_urls = {"redis://127.0.0.1:" + std::to_string(prefixd::testing::pick_free_port())},
                           .timeout = 200ms, .backoff = {.initial = 1000ms, .max = 1000ms}});
  EXPECT_EQ(store->get("k"), std::nullopt);
  // Inside the backoff the node is not contacted at all: many calls, almost no time.
  const auto start = Clock::now();
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(store->get("k"), std::nullopt);
  EXPECT_LT(Clock::now() - start, 500ms);
  EXPECT_EQ(store->counters().misses, 1001u);
  EXPECT_EQ(store->counters().connects, 1u);
}

class RemoteStoreCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_program("valkey-server")) GTEST_SKIP() << "valkey-server is not on PATH (run through scripts/in-env)";
    if (!have_program("valkey-cli")) GTEST_SKIP() << "valkey-cli is not on PATH: cannot create a cluster";
    cluster_ = std::make_unique<prefixd::testing::ValkeyCluster>(3);
  }
  std::vector<std::string> keys(int count) const {
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) out.push_back("key-" + std::to_string(i));
    return out;
  }

  const std::vector<std::unique_ptr<ValkeyProcess>>& nodes() const { return cluster_->nodes(); }

  std::unique_ptr<prefixd::testing::ValkeyCluster> cluster_;
};

TEST_F(RemoteStoreCluster, DetectedClusterSpreadsKeysOverNodesWithoutRedirections) {
  auto store = make_store({.seed_urls = {nodes()[0]->url()}, .timeout = 500ms, .key_prefix = "fp:"});
  const auto all = keys(200);
  for (const auto& key : all) ASSERT_TRUE(store->set(key, "v-" + key));
  EXPECT_TRUE(store->cluster_enabled());
  const auto values = store->get_many(all);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(values[i], "v-" + all[i]);
  EXPECT_EQ(store->counters().redirections, 0u) << "the slot map came from CLUSTER SLOTS";
  for (const auto& node : nodes()) EXPECT_NE(node->cli("dbsize"), "0\n") << "every node holds some keys";
}

TEST_F(RemoteStoreCluster, SlotFunctionAgreesWithTheServer) {
  for (const std::string key : {"foo", "123456789", "{user1000}.following", "fp:key-7", "a{}b", "x{y}z{w}"}) {
    EXPECT_EQ(nodes()[0]->cli("cluster keyslot '" + key + "'"), std::to_string(key_hash_slot(key)) + "\n") << key;
  }
}

TEST_F(RemoteStoreCluster, StaleSlotMapIsCorrectedByMovedRedirections) {
  // Explicit cluster mode starts with an empty slot map: every key first goes to the seed.
  auto store = make_store({.seed_urls = {nodes()[1]->url()}, .timeout = 500ms, .cluster_mode = ClusterMode::cluster});
  const auto all = keys(100);
  for (const auto& key : all) ASSERT_TRUE(store->set(key, "v-" + key));
  const auto learned = store->counters().redirections;
  EXPECT_GT(learned, 0u);
  const auto values = store->get_many(all);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(values[i], "v-" + all[i]);
  EXPECT_EQ(store->counters().redirections, learned) << "MOVED updated the slot map";
  EXPECT_EQ(store->counters().errors, 0u);
}


TEST_F(RemoteStoreCluster, AskRedirectionDuringAMigrationReachesTheImportingNode) {
  auto store = make_store({.seed_urls = {nodes()[0]->url()}, .timeout = 500ms});
  const std::string key = "migrating-key";
  // The node that owns the key's slot answers it; the others answer MOVED.
  std::size_t owner = nodes().size();
  for (std::size_t i = 0; i < nodes().size(); ++i) {
    if (nodes()[i]->cli("get " + key).find("MOVED") == std::string::npos) owner = i;
  }
  ASSERT_LT(owner, nodes().size());
  const auto& source = *nodes()[owner];
  const auto& target = *nodes()[(owner + 1) % nodes().size()];
  const auto trim = [](std::string text) { return text.substr(0, text.find_first_of("\r\n")); };
  const std::string slot = std::to_string(key_hash_slot(key));
  ASSERT_EQ(trim(target.cli("cluster setslot " + slot + " importing " + trim(source.cli("cluster myid")))), "OK");
  ASSERT_EQ(trim(source.cli("cluster setslot " + slot + " migrating " + trim(target.cli("cluster myid")))), "OK");

  // The key is not on the migrating source, so it sends the client to the importing target.
  ASSERT_TRUE(store->set(key, "moved-along"));
  EXPECT_EQ(store->counters().redirections, 1u);
  EXPECT_EQ(trim(source.cli("cluster countkeysinslot " + slot)), "0");
  EXPECT_EQ(trim(target.cli("cluster countkeysinslot " + slot)), "1");
  EXPECT_EQ(store->get(key), "moved-along");
  // ASK does not change the slot map: the next read asks the source first again.
  EXPECT_EQ(store->counters().redirections, 2u);
  EXPECT_EQ(store->counters().errors, 0u);
}

}  // namespace
}  // namespace prefixd::remote
