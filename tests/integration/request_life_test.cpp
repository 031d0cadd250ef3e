// The cache's request-life face (cache/request_life.h) with a shared tier on a real valkey-server:
// a lookup starts when the ticket opens, admit() waits for it until its deadline without using a
// sequence, adopts what it brought, and counts a lookup it stopped waiting for exactly once; and a
// server's queue, where a request waiting for its lookup holds up no one behind it.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/prefix_cache.h"
#include "server_process.h"
#include "support/fake_engine.h"
#include "valkey_process.h"

namespace prefixd::cache {
namespace {

using namespace std::chrono_literals;
using engine::SeqId;
using engine::Token;
using nlohmann::json;
using prefixd::testing::have_program;
using prefixd::testing::ValkeyProcess;

constexpr SeqId kSlot = 0;
constexpr SeqId kScratch = 7;  // slots 0-1, holders 2-6

std::vector<Token> tokens_from(int begin, int count) {
  std::vector<Token> out;
  for (int i = 0; i < count; ++i) out.push_back((begin + i) % 250);
  return out;
}

// One server's engine and cache, with the shared tier at `url`.
struct Node {
  engine::FakeEngine engine{{.n_ctx = 4096, .n_batch = 16, .n_seq = 8}};
  std::unique_ptr<PrefixCache> cache;

  Node(const std::string& url, std::int32_t timeout_ms) {
    CacheConfig config;
    config.min_prefix = 4;
    config.block_size = 4;
    config.host_segment_tokens = 8;
    config.device_cells = 4096;
    config.host_capacity_bytes = 1 << 20;
    config.remote_urls = {url};
    config.remote_timeout_ms = timeout_ms;
    cache = std::make_unique<PrefixCache>(engine, config, std::vector<SeqId>{2, 3, 4, 5, 6}, kScratch);
  }

  // Computes the rest of `prompt` in `seq` (the reused part is there) and donates it.
  void finish(const std::vector<Token>& prompt, std::int32_t reused, SeqId seq = kSlot) {
    const auto n = static_cast<std::int32_t>(prompt.size());
    for (std::int32_t i = reused; i < n; i += engine.batch_size()) {
      const std::int32_t end = std::min(n, i + engine.batch_size());
      std::vector<engine::BatchToken> batch;
      for (std::int32_t j = i; j < end; ++j) batch.push_back({prompt[static_cast<size_t>(j)], j, seq, false});
      ASSERT_EQ(engine.decode(batch), engine::DecodeStatus::ok);
      cache->advance(seq, end);
    }
    cache->donate(seq, prompt);
  }

  // Admits `ticket` into `seq` once its lookup is no longer pending.
  Admission admit_after_lookup(Ticket& ticket, SeqId seq = kSlot) {
    Admission got = cache->admit(ticket, seq, Room{.need = 1000});
    while (got.kind == Admission::Kind::lookup_pending) {
      std::this_thread::sleep_for(5ms);
      got = cache->admit(ticket, seq, Room{.need = 1000});
    }
    return got;
  }

  // Waits until the write-behind queue to the shared tier is empty and it wrote something.
  void wait_for_writes() const {
    for (const auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;) {
      const RemoteStats remote = cache->stats().remote;
      if (remote.queued_bytes == 0 && remote.writes > 0) return;
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "the shared tier's writes did not settle";
  }
};

class RequestLifeRemote : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_program("valkey-server")) GTEST_SKIP() << "valkey-server is not on PATH (run through scripts/in-env)";
    valkey_ = std::make_unique<ValkeyProcess>(prefixd::testing::pick_free_port());
  }
  std::unique_ptr<ValkeyProcess> valkey_;
};

const RequestKey kKey{"ns", "s"};
const Room kRoom{.running = 0, .need = 1000, .nothing_running = false};

TEST_F(RequestLifeRemote, TheLookupStartsAtOpenAndAdmitAdoptsWhatItBrought) {
  const auto prompt = tokens_from(0, 65);  // 64 tokens before the one-token guard: eight whole segments
  {
    Node a(valkey_->url(), 2000);
    Ticket ticket = a.cache->open(kKey, prompt, 0, [] {});
    const Admission got = a.admit_after_lookup(ticket);
    ASSERT_EQ(got.kind, Admission::Kind::ready);
    EXPECT_EQ(got.acquisition.outcome, Outcome::cold) << "an empty store brought nothing";
    a.finish(prompt, got.acquisition.reused);
    a.wait_for_writes();
  }
  Node b(valkey_->url(), 2000);
  std::atomic<int> done_calls{0};
  Ticket ticket = b.cache->open(kKey, prompt, 0, [&] { done_calls += 1; });
  EXPECT_EQ(b.cache->stats().remote.fetches, 1) << "the lookup started when the ticket opened";
  const Admission early = b.cache->admit(ticket, kSlot, kRoom);
  if (early.kind == Admission::Kind::lookup_pending) {
    EXPECT_EQ(b.cache->stats().requests.running, 0) << "a request waiting for its lookup holds no sequence";
    EXPECT_TRUE(b.engine.sequence_positions(kSlot).empty());
    for (const auto until = std::chrono::steady_clock::now() + 10s; done_calls == 0 && std::chrono::steady_clock::now() < until;) {
      std::this_thread::sleep_for(5ms);
    }
    ASSERT_EQ(done_calls, 1);
  }
  const Admission got = early.kind == Admission::Kind::lookup_pending ? b.cache->admit(ticket, kSlot, kRoom) : early;
  ASSERT_EQ(got.kind, Admission::Kind::ready);
  EXPECT_EQ(got.acquisition.reused, 64) << "everything but the one-token guard";
  EXPECT_EQ(got.acquisition.tier, Tier::remote);
  EXPECT_EQ(b.cache->stats().remote.fetch_timeouts, 0);
  EXPECT_THROW(b.cache->admit(ticket, 1, kRoom), std::logic_error) << "a spent ticket admits nothing";
  b.cache->release(kSlot);
}

TEST_F(RequestLifeRemote, AHungStoreKeepsTheRequestWaitingUntilItsDeadlineThenItRunsWithoutIt) {
  const auto prompt = tokens_from(0, 64);
  Node node(valkey_->url(), 300);
  valkey_->signal(SIGSTOP);  // the socket stays open, nothing answers
  Ticket ticket = node.cache->open(kKey, prompt, 0, [] {});
  const Admission waiting = node.cache->admit(ticket, kSlot, kRoom);
  ASSERT_EQ(waiting.kind, Admission::Kind::lookup_pending);
  EXPECT_GT(waiting.deadline, std::chrono::steady_clock::now());
  EXPECT_EQ(node.cache->stats().requests.running, 0);
  std::this_thread::sleep_until(waiting.deadline + 10ms);
  const Admission got = node.cache->admit(ticket, kSlot, kRoom);
  ASSERT_EQ(got.kind, Admission::Kind::ready);
  EXPECT_EQ(got.acquisition.outcome, Outcome::cold);
  EXPECT_EQ(node.cache->stats().remote.fetch_timeouts, 1);
  EXPECT_EQ(node.cache->stats().requests.running, 1);
  node.cache->release(kSlot);
  valkey_->signal(SIGCONT);
}

TEST_F(RequestLifeRemote, AFullContextLeavesTheTicketForLaterAndCountsALateLookupOnce) {
  const auto prompt = tokens_from(0, 64);
  Node node(valkey_->url(), 300);
  valkey_->signal(SIGSTOP);
  Ticket ticket = node.cache->open(kKey, prompt, 0, [] {});
  std::this_thread::sleep_until(node.cache->admit(ticket, kSlot, kRoom).deadline + 10ms);
  const Room no_room{.running = 4096, .need = 65, .nothing_running = false};
  EXPECT_EQ(node.cache->admit(ticket, kSlot, no_room).kind, Admission::Kind::full);
  EXPECT_EQ(node.cache->stats().remote.fetch_timeouts, 1) << "past its deadline: abandoned before room was made";
  EXPECT_TRUE(node.engine.sequence_positions(kSlot).empty()) << "nothing used";
  EXPECT_EQ(node.cache->admit(ticket, kSlot, Room{.running = 4096, .need = 65, .nothing_running = true}).kind,
            Admission::Kind::ready)
      << "with nothing running it is admitted anyway";
  EXPECT_EQ(node.cache->stats().remote.fetch_timeouts, 1) << "counted once";
  node.cache->release(kSlot);
  valkey_->signal(SIGCONT);
}

TEST_F(RequestLifeRemote, AnAbandonedTicketCountsItsLookupADroppedOneCountsNothingAndCallsNoOne) {
  Node node(valkey_->url(), 300);
  valkey_->signal(SIGSTOP);
  std::atomic<int> dropped_calls{0};
  Ticket abandoned = node.cache->open(kKey, tokens_from(0, 64), 0, [] {});
  std::optional<Ticket> dropped = node.cache->open(kKey, tokens_from(100, 64), 0, [&] { dropped_calls += 1; });
  ASSERT_EQ(node.cache->stats().remote.fetches, 2);
  node.cache->abandon(abandoned);
  EXPECT_EQ(node.cache->stats().remote.fetch_timeouts, 1) << "a client that went away: the lookup was abandoned";
  const int calls_before = dropped_calls;
  dropped.reset();  // as a server that shuts down drops its queue
  valkey_->signal(SIGCONT);
  // The reader thread gets through both lookups: the store answers again, or its calls time out.
  for (const auto until = std::chrono::steady_clock::now() + 5s;
       node.cache->stats().remote.fetch_latency_count < 2 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(node.cache->stats().remote.fetch_latency_count, 2);
  EXPECT_EQ(dropped_calls, calls_before) << "a destroyed ticket's lookup calls no one";
  EXPECT_EQ(node.cache->stats().remote.fetch_timeouts, 1) << "dropping a ticket counts nothing";
}

TEST_F(RequestLifeRemote, AServerAdmitsTheRequestsBehindOneWaitingForItsLookup) {
  prefixd::testing::ServerConfig config;
  config.ctx_size = 8192;
  config.extra_args = {"--cache-remote", valkey_->url(), "--cache-remote-timeout-ms", "2000"};
  prefixd::testing::ServerProcess server(config);
  auto first = server.client();
  auto second = server.client();
  const auto chat = [](const std::string& text, bool cache_prompt) {
    return json{{"messages", json::array({{{"role", "user"}, {"content", text}}})},
                {"max_tokens", 4},
                {"temperature", 0},
                {"cache_prompt", cache_prompt}};
  };
  ASSERT_EQ(prefixd::testing::post_json(*first, "/v1/chat/completions", chat("connect first", true)).status, 200);
  valkey_->signal(SIGSTOP);
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "Note " + std::to_string(i) + ": the ledger balances when every entry is checked. ";
  std::chrono::steady_clock::time_point first_done;
  std::thread waiting([&] {
    EXPECT_EQ(prefixd::testing::post_json(*first, "/v1/chat/completions", chat(long_text, true)).status, 200);
    first_done = std::chrono::steady_clock::now();
  });
  // The long prompt is queued first, its lookup hanging: it counts as queued and holds no sequence.
  bool counted = false;
  for (const auto until = std::chrono::steady_clock::now() + 1500ms; !counted && std::chrono::steady_clock::now() < until;) {
    const std::string metrics = second->Get("/metrics")->body;
    counted = prefixd::testing::metric_value(metrics, "prefixd_requests_queued") == 1 &&
              prefixd::testing::metric_value(metrics, "prefixd_requests_running") == 0;
    if (!counted) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(counted) << "a request waiting for its lookup is queued, not running";
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(prefixd::testing::post_json(*second, "/v1/chat/completions", chat("A short one.", false)).status, 200);
  const auto second_done = std::chrono::steady_clock::now();
  waiting.join();
  valkey_->signal(SIGCONT);
  EXPECT_LT(second_done, first_done) << "the request that does not use the cache went ahead";
  EXPECT_LT(second_done - sent, 1500ms);
  const json remote = prefixd::testing::get_json(*second, "/v1/cache/stats").body["tiers"]["remote"];
  EXPECT_EQ(remote["lookup_timeouts"], 1) << remote.dump();
  EXPECT_EQ(remote["lookup_hits"], 0) << remote.dump();
}

}  // namespace
}  // namespace prefixd::cache
