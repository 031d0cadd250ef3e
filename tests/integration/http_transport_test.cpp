// The HTTP transport under the connections an attacker (or a sloppy client) opens: thousands idle,
// hundreds trickling headers, pipelined requests, oversized URLs and headers, half-closed and reset
// sockets. The real binary on loopback, the tiny model.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "raw_connection.h"
#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// Time for a fresh connection to get GET /health answered.
std::chrono::microseconds health_latency(int port) {
  const auto started = std::chrono::steady_clock::now();
  RawConnection probe(port);
  EXPECT_TRUE(probe.connected());
  probe.send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string reply = probe.read_for(milliseconds(20000));
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200")) << reply;
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
}

json small_chat() {
  return {{"messages", json::array({{{"role", "user"}, {"content", "Hello there"}}})},
          {"max_tokens", 8},
          {"temperature", 0}};
}

std::string metrics(const ServerProcess& server) {
  auto client = server.client();
  auto res = client->Get("/metrics");
  return res ? res->body : std::string();
}

TEST(HttpTransport, IdleAndTricklingConnectionsDoNotStarveRequests) {
  ASSERT_GE(raise_test_open_file_limit(), 3000u) << "the test needs file descriptors for 2,200 sockets";
  ServerProcess server({.extra_args = {"--http-max-connections-per-client", "0"}});
  std::vector<RawConnection> idle;
  for (int i = 0; i < 2000; ++i) {
    idle.emplace_back(server.port());
    ASSERT_TRUE(idle.back().connected()) << i;
  }
  std::vector<RawConnection> trickling;
  for (int i = 0; i < 200; ++i) {
    trickling.emplace_back(server.port());
    ASSERT_TRUE(trickling.back().connected());
    trickling.back().send("GET /health HTTP/1.1\r\nX-Slow: ");
  }
  std::atomic<bool> done{false};
  std::jthread trickle([&] {
    while (!done) {
      for (auto& c : trickling) c.send("a");
      std::this_thread::sleep_for(milliseconds(200));
    }
  });
  std::this_thread::sleep_for(milliseconds(500));  // every connection is in and waiting

  std::vector<std::chrono::microseconds> latencies;
  for (int i = 0; i < 7; ++i) latencies.push_back(health_latency(server.port()));
  std::ranges::sort(latencies);
  std::cout << "/health with 2,000 idle and 200 trickling connections: median " << latencies[latencies.size() / 2].count()
            << " us, slowest " << latencies.back().count() << " us\n";
  EXPECT_LT(latencies[latencies.size() / 2], milliseconds(100)) << "median /health latency";
  EXPECT_LT(latencies.back(), milliseconds(1000)) << "slowest /health";

  auto client = server.client();
  const auto reply = post_json(*client, "/v1/chat/completions", small_chat());
  EXPECT_EQ(reply.status, 200) << reply.raw;
  EXPECT_GE(metric_value(metrics(server), "prefixd_http_connections_open"), 2200);
  done = true;
}

TEST(HttpTransport, AClientOverItsLimitLosesItsOldestIdleConnection) {
  ServerProcess server({.extra_args = {"--http-max-connections-per-client", "8"}});
  std::vector<RawConnection> idle;
  for (int i = 0; i < 8; ++i) idle.emplace_back(server.port());
  std::this_thread::sleep_for(milliseconds(300));
  // /health itself comes from the same address: it gets in by evicting the oldest idle one.
  EXPECT_LT(health_latency(server.port()), milliseconds(5000));
  EXPECT_TRUE(idle.front().closed_by_peer_within(milliseconds(3000)));
  EXPECT_FALSE(idle.back().closed_by_peer_within(milliseconds(200)));
  EXPECT_GE(metric_value(metrics(server), "prefixd_http_connections_evicted_total"), 1);
}

TEST(HttpTransport, SlowHeadersAreCutAtTheHeaderTimeout) {
  ServerProcess server({.extra_args = {"--http-header-timeout", "0.5"}});
  RawConnection slow(server.port());
  slow.send("GET /health HTTP/1.1\r\nHost: x\r\n");  // never finishes its headers
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(slow.closed_by_peer_within(milliseconds(5000)));
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(4000));
  EXPECT_GE(metric_value(metrics(server), "prefixd_http_timeouts_total"), 1);
}

TEST(HttpTransport, PipelinedRequestsAreAnsweredInOrder) {
  ServerProcess server;
  RawConnection c(server.port());
  const std::string tokenize_body = R"({"content":"hi"})";
  c.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
         "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
         "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(tokenize_body.size()) + "\r\nConnection: close\r\n\r\n" + tokenize_body);
  const std::string replies = c.read_for(milliseconds(20000));
  const auto first = replies.find("{\"status\":\"ok\"}");
  const auto second = replies.find("\"object\":\"list\"");
  const auto third = replies.find("\"tokens\"");
  ASSERT_NE(first, std::string::npos) << replies;
  ASSERT_NE(second, std::string::npos) << replies;
  ASSERT_NE(third, std::string::npos) << replies;
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  int answered = 0;
  for (auto at = replies.find("HTTP/1.1 200"); at != std::string::npos; at = replies.find("HTTP/1.1 200", at + 1)) ++answered;
  EXPECT_EQ(answered, 3) << replies;
}

TEST(HttpTransport, OversizedUrlAndHeadersGet414And431) {
  ServerProcess server;
  {
    RawConnection c(server.port());
    c.send("GET /" + std::string(100'000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string reply = c.read_for(milliseconds(10000));
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 414")) << reply.substr(0, 200);
    EXPECT_NE(reply.find("\"uri_too_long\""), std::string::npos) << reply.substr(0, 400);
  }
  {
    RawConnection c(server.port());
    c.send("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(100'000, 'b') + "\r\n\r\n");
    const std::string reply = c.read_for(milliseconds(10000));
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 431")) << reply.substr(0, 200);
  }
  {
    RawConnection c(server.port());
    c.send("NONSENSE\r\n\r\n");
    const std::string reply = c.read_for(milliseconds(10000));
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 400")) << reply.substr(0, 200);
    EXPECT_NE(reply.find("\"error\""), std::string::npos);
  }
  EXPECT_EQ(health_latency(server.port()) < milliseconds(5000), true);
}

TEST(HttpTransport, AHalfClosedClientStillGetsItsAnswer) {
  ServerProcess server;
  const std::string body = small_chat().dump();
  RawConnection c(server.port());
  c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body);
  c.shutdown_send();
  const std::string reply = c.read_for(milliseconds(60000));
  // An interim 102 may come first: it is how the server learns the client is still there.
  const auto final_status = reply.starts_with("HTTP/1.1 102 Processing\r\n\r\n") ? reply.substr(27) : reply;
  EXPECT_TRUE(final_status.starts_with("HTTP/1.1 200")) << reply;
  EXPECT_NE(reply.find("\"chat.completion\""), std::string::npos) << reply;
}

TEST(HttpTransport, AResetClientCancelsItsRequest) {
  ServerProcess server({.parallel = 1, .ctx_size = 16384});
  const std::string body = json{{"prompt", "Count forever"}, {"max_tokens", 100000}, {"temperature", 0}}.dump();
  RawConnection c(server.port());
  c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body);
  std::this_thread::sleep_for(milliseconds(500));
  c.reset();
  // The only slot frees up: a second request completes without the first running to the end of
  // its 16,384-token context (greedy on this prompt, the tiny model never stops on its own).
  auto client = server.client();
  const auto reply = post_json(*client, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 4}});
  EXPECT_EQ(reply.status, 200) << reply.raw;
  EXPECT_LT(metric_value(metrics(server), "prefixd_generated_tokens_total"), 8000);
}

// A stream that is silent (its request waits behind another) and whose client closes is noticed at
// once, not at the next keep-alive: the end of input makes the stream write a frame that adds
// nothing, and the closed client's reset to it cancels the request.
TEST(HttpTransport, AClientThatClosesWhileItsStreamWaitsIsNoticedAtOnce) {
  ServerProcess server({.extra_args = {"--stream-keepalive", "600"}, .parallel = 1, .ctx_size = 16384});
  // The one slot: greedy on this prompt the tiny model never stops before its context is full.
  const std::string busy = json{{"prompt", "Count forever"}, {"max_tokens", 100000}, {"temperature", 0}}.dump();
  RawConnection holder(server.port());
  holder.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
              std::to_string(busy.size()) + "\r\n\r\n" + busy);
  const auto queued_now = [&] { return metric_value(metrics(server), "prefixd_requests_queued"); };
  const auto waits_until = [](const auto& condition) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!condition() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
    return condition();
  };
  ASSERT_TRUE(waits_until([&] { return metric_value(metrics(server), "prefixd_requests_running") == 1; }));

  const std::string waiting = json{{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                                   {"max_tokens", 4}, {"stream", true}}.dump();
  {
    RawConnection c(server.port());
    c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(waiting.size()) + "\r\n\r\n" + waiting);
    // The head and the first event arrive while the request waits; everything sent is read, so
    // the close below is an orderly one (a FIN), not a reset.
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.find("data: ") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      got += c.read_for(milliseconds(200), 1);
    }
    ASSERT_NE(got.find("data: "), std::string::npos) << got;
    ASSERT_TRUE(waits_until([&] { return queued_now() == 1; }));
  }
  const auto closed_at = std::chrono::steady_clock::now();
  EXPECT_TRUE(waits_until([&] { return queued_now() == 0; })) << "the closed client's request still waits";
  EXPECT_LT(std::chrono::steady_clock::now() - closed_at, std::chrono::seconds(10));
  holder.reset();
}

}  // namespace
}  // namespace prefixd::testing
