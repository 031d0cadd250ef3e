// The remote tier's client without a server: URLs, hash slots, counters, configuration errors.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "remote/hash_slot.h"
#include "remote/remote_counters.h"
#include "remote/remote_endpoint.h"
#include "remote/remote_store.h"

namespace prefixd::remote {
namespace {

TEST(RemoteUrl, ParsesHostAndPort) {
  auto endpoint = parse_remote_url("redis://127.0.0.1:6379");
  ASSERT_TRUE(endpoint) << endpoint.error();
  EXPECT_EQ(endpoint->host, "127.0.0.1");
  EXPECT_EQ(endpoint->port, 6379);
  EXPECT_EQ(endpoint->address(), "127.0.0.1:6379");
  auto named = parse_remote_url("redis://valkey-0.cache.svc:7000/");
  ASSERT_TRUE(named) << named.error();
  EXPECT_EQ(named->host, "valkey-0.cache.svc");
  EXPECT_EQ(named->port, 7000);
}

TEST(RemoteUrl, RejectsEverythingElseWithTheUrlInTheMessage) {
  for (const char* bad : {"", "127.0.0.1:6379", "http://h:1", "rediss://h:1", "redis://h", "redis://:6379",
                          "redis://h:0", "redis://h:65536", "redis://h:12x", "redis://h:-1", "redis://u:p@h:1",
                          "redis://h:1/0", "redis://h h:1"}) {
    auto endpoint = parse_remote_url(bad);
    ASSERT_FALSE(endpoint) << bad;
    EXPECT_NE(endpoint.error().find(std::string("'") + bad + "'"), std::string::npos) << endpoint.error();
    EXPECT_NE(endpoint.error().find("redis://HOST:PORT"), std::string::npos) << endpoint.error();
  }
}

TEST(RemoteUrl, ParsesRedirectionAddresses) {
  auto node = parse_node_address("10.0.0.5:6380");
  ASSERT_TRUE(node);
  EXPECT_EQ(*node, (RemoteEndpoint{"10.0.0.5", 6380}));
  auto own = parse_node_address(":6380");  // a node that does not know its own address
  ASSERT_TRUE(own);
  EXPECT_EQ(own->host, "");
  EXPECT_FALSE(parse_node_address("10.0.0.5"));
}

TEST(HashSlot, Crc16MatchesTheClusterSpecificationVector) {
  EXPECT_EQ(crc16_xmodem("123456789"), 0x31C3);
  EXPECT_EQ(crc16_xmodem(""), 0);
}

TEST(HashSlot, KnownKeysLandInTheirSlots) {
  // Slots as CLUSTER KEYSLOT reports them.
  EXPECT_EQ(key_hash_slot("foo"), 12182);
  EXPECT_EQ(key_hash_slot("bar"), 5061);
  EXPECT_EQ(key_hash_slot("123456789"), 0x31C3 % kClusterSlots);
}

TEST(HashSlot, HashTagsShareASlot) {
  EXPECT_EQ(key_hash_slot("{user1000}.following"), key_hash_slot("{user1000}.followers"));
  EXPECT_EQ(key_hash_slot("{user1000}.following"), key_hash_slot("user1000"));
  // Only the first tag counts; an empty tag or an unclosed brace hashes the whole key.
  EXPECT_EQ(key_hash_slot("foo{bar}{zap}"), key_hash_slot("bar"));
  EXPECT_EQ(key_hash_slot("foo{}{bar}"), key_hash_slot("foo{}{bar}"));
  EXPECT_NE(key_hash_slot("foo{}{bar}"), key_hash_slot("bar"));
  EXPECT_EQ(key_hash_slot("foo{{bar}}zap"), key_hash_slot("{bar"));
  EXPECT_NE(key_hash_slot("{user1000"), key_hash_slot("user1000"));
}

TEST(RemoteCounters, SnapshotSumsConcurrentIncrements) {
  RemoteCounterSink sink;
  std::vector<std::jthread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&sink] {
      for (int i = 0; i < 1000; ++i) {
        sink.add_hits(1);
        sink.add_misses(2);
        sink.add_errors(1);
        sink.add_bytes_read(10);
        sink.add_bytes_written(5);
        sink.add_redirection();
        sink.add_connect();
        sink.add_latency_us(3);
      }
    });
  }
  threads.clear();
  const auto snapshot = sink.snapshot();
  EXPECT_EQ(snapshot.hits, 4000u);
  EXPECT_EQ(snapshot.misses, 8000u);
  EXPECT_EQ(snapshot.errors, 4000u);
  EXPECT_EQ(snapshot.bytes_read, 40000u);
  EXPECT_EQ(snapshot.bytes_written, 20000u);
  EXPECT_EQ(snapshot.redirections, 4000u);
  EXPECT_EQ(snapshot.connects, 4000u);
  EXPECT_EQ(snapshot.latency_us_sum, 12000u);
  EXPECT_EQ(snapshot.latency_count, 4000u);
}

TEST(RemoteStoreConfig, BadConfigurationIsAnErrorValue) {
  EXPECT_FALSE(RemoteStore::create({}));
  auto bad_url = RemoteStore::create({.seed_urls = {"redis://a:1", "tcp://b:2"}});
  ASSERT_FALSE(bad_url);
  EXPECT_NE(bad_url.error().find("tcp://b:2"), std::string::npos);
  EXPECT_FALSE(RemoteStore::create({.seed_urls = {"redis://a:1"}, .timeout = std::chrono::milliseconds{0}}));
  EXPECT_TRUE(RemoteStore::create({.seed_urls = {"redis://a:1"}}));
}

}  // namespace
}  // namespace prefixd::remote
