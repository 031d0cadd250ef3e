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

namespace prefixd::remote {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The output of a shell command (valkey-cli), or "" when it could not run.
struct PipeClose {
  void operator()(FILE* pipe) const { pclose(pipe); }
};
std::string run_command(const std::string& command) {
  std::unique_ptr<FILE, PipeClose> pipe(popen(command.c_str(), "r"));
  if (!pipe) return {};
  std::string out;
  std::array<char, 512> buffer{};
  while (fgets(buffer.data(), static_cast<int>(buffer.size()), pipe.get()) != nullptr) out += buffer.data();
  return out;
}

bool have_program(const std::string& name) { return run_command("command -v " + name + " 2>/dev/null") != ""; }

// A valkey-server child on a loopback port, without persistence, killed and reaped on destruction.
class ValkeyProcess {
 public:
  explicit ValkeyProcess(int port, std::vector<std::string> extra_args = {}) : port_(port), extra_args_(std::move(extra_args)) {
    start();
  }
  ~ValkeyProcess() { kill_now(); }
  ValkeyProcess(const ValkeyProcess&) = delete;
  ValkeyProcess& operator=(const ValkeyProcess&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  std::string cli(const std::string& args) const {
    return run_command("valkey-cli -p " + std::to_string(port_) + " " + args + " 2>&1");
  }
  void signal(int signal_number) const { ::kill(pid_, signal_number); }

  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  void start() {
    std::vector<std::string> args{"valkey-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--loglevel", "warning"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    pid_ = fork();
    if (pid_ == 0) {
      // Its startup warnings (memory overcommit) are noise in the test output.
      const int null_fd = open("/dev/null", O_WRONLY);
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execvp("valkey-server", argv.data());
      _exit(127);
    }
    const auto deadline = Clock::now() + 10s;
    while (Clock::now() < deadline) {
      if (cli("ping").starts_with("PONG")) return;
      std::this_thread::sleep_for(50ms);
    }
    throw std::runtime_error("valkey-server did not answer on port " + std::to_string(port_));
  }

 private:
  int port_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
};

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
    dir_ = std::filesystem::temp_directory_path() / ("prefixd-valkey-cluster-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    std::string create = "valkey-cli --cluster create";
    for (int i = 0; i < 3; ++i) {
      // A cluster node also listens on its port + 10000 (the cluster bus), so ports stay low.
      int port = prefixd::testing::pick_free_port();
      while (port > 55000) port = prefixd::testing::pick_free_port();
      nodes_.push_back(std::make_unique<ValkeyProcess>(
          port, std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file",
                                         "nodes-" + std::to_string(port) + ".conf", "--dir", dir_.string()}));
      create += " 127.0.0.1:" + std::to_string(port);
    }
    const auto output = run_command(create + " --cluster-replicas 0 --cluster-yes 2>&1");
    const auto deadline = Clock::now() + 20s;
    for (const auto& node : nodes_) {
      while (node->cli("cluster info").find("cluster_state:ok") == std::string::npos) {
        ASSERT_LT(Clock::now(), deadline) << "the cluster did not form:\n" << output;
        std::this_thread::sleep_for(100ms);
      }
    }
  }
  void TearDown() override {
    nodes_.clear();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  std::vector<std::string> keys(int count) const {
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) out.push_back("key-" + std::to_string(i));
    return out;
  }

  std::filesystem::path dir_;
  std::vector<std::unique_ptr<ValkeyProcess>> nodes_;
};

TEST_F(RemoteStoreCluster, DetectedClusterSpreadsKeysOverNodesWithoutRedirections) {
  auto store = make_store({.seed_urls = {nodes_[0]->url()}, .timeout = 500ms, .key_prefix = "fp:"});
  const auto all = keys(200);
  for (const auto& key : all) ASSERT_TRUE(store->set(key, "v-" + key));
  EXPECT_TRUE(store->cluster_enabled());
  const auto values = store->get_many(all);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(values[i], "v-" + all[i]);
  EXPECT_EQ(store->counters().redirections, 0u) << "the slot map came from CLUSTER SLOTS";
  for (const auto& node : nodes_) EXPECT_NE(node->cli("dbsize"), "0\n") << "every node holds some keys";
}

TEST_F(RemoteStoreCluster, SlotFunctionAgreesWithTheServer) {
  for (const std::string key : {"foo", "123456789", "{user1000}.following", "fp:key-7", "a{}b", "x{y}z{w}"}) {
    EXPECT_EQ(nodes_[0]->cli("cluster keyslot '" + key + "'"), std::to_string(key_hash_slot(key)) + "\n") << key;
  }
}

TEST_F(RemoteStoreCluster, StaleSlotMapIsCorrectedByMovedRedirections) {
  // Explicit cluster mode starts with an empty slot map: every key first goes to the seed.
  auto store = make_store({.seed_urls = {nodes_[1]->url()}, .timeout = 500ms, .cluster_mode = ClusterMode::cluster});
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
  auto store = make_store({.seed_urls = {nodes_[0]->url()}, .timeout = 500ms});
  const std::string key = "migrating-key";
  // The node that owns the key's slot answers it; the others answer MOVED.
  std::size_t owner = nodes_.size();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->cli("get " + key).find("MOVED") == std::string::npos) owner = i;
  }
  ASSERT_LT(owner, nodes_.size());
  const auto& source = *nodes_[owner];
  const auto& target = *nodes_[(owner + 1) % nodes_.size()];
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
