// SIGTERM drains: no new connections, requests in flight finish within the grace period, streams
// still running when it ends get an error event and [DONE], and the process exits 0.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "raw_connection.h"
#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// Greedy on this prompt, the tiny model falls into a loop that never emits end-of-generation, so
// the stream lasts until max_tokens or the context's end.
std::string streaming_request(int max_tokens) {
  return json_post_bytes(
      "/v1/completions",
      json{{"prompt", "Count forever"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", true}}.dump());
}

bool exits_within(ServerProcess& server, milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (server.running()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

TEST(Shutdown, StreamsStillRunningAtTheEndOfTheGraceGetAnErrorEventAndDone) {
  ServerProcess server({.extra_args = {"--shutdown-grace-seconds", "1"}, .ctx_size = 32768});
  RawConnection stream(server.port());
  stream.send(streaming_request(30000));
  // The stream is under way before the signal.
  std::string received = stream.read_for(milliseconds(30000), 400);
  ASSERT_NE(received.find("data: {"), std::string::npos) << received;
  ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
  received += stream.read_for(milliseconds(30000));
  EXPECT_NE(received.find("\"server_shutting_down\""), std::string::npos) << received.substr(received.size() - std::min<std::size_t>(received.size(), 600));
  EXPECT_NE(received.find("data: [DONE]"), std::string::npos);
  EXPECT_TRUE(received.ends_with("0\r\n\r\n")) << "the chunked body must be terminated";
  ASSERT_TRUE(exits_within(server, milliseconds(30000))) << server.log();
  EXPECT_EQ(server.exit_status(), 0) << server.log();
}

TEST(Shutdown, RequestsFinishWithinTheGraceAndNewConnectionsAreRefused) {
  ServerProcess server({.extra_args = {"--shutdown-grace-seconds", "60"}});
  RawConnection stream(server.port());
  stream.send(streaming_request(64));
  std::string received = stream.read_for(milliseconds(30000), 200);
  ASSERT_FALSE(received.empty());
  ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
  std::this_thread::sleep_for(milliseconds(300));
  RawConnection late(server.port());
  if (late.connected()) {  // accepted by the kernel before the listener closed: still not served
    late.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_FALSE(late.read_for(milliseconds(3000)).starts_with("HTTP/1.1 200"));
  }
  received += stream.read_for(milliseconds(60000));
  EXPECT_NE(received.find("\"finish_reason\":\"length\""), std::string::npos) << received;
  EXPECT_EQ(received.find("server_shutting_down"), std::string::npos);
  EXPECT_NE(received.find("data: [DONE]"), std::string::npos);
  ASSERT_TRUE(exits_within(server, milliseconds(30000))) << server.log();
  EXPECT_EQ(server.exit_status(), 0) << server.log();
}

}  // namespace
}  // namespace prefixd::testing
