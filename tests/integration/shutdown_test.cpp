// SIGTERM drains: no new connections, idle ones close, requests in flight finish within the grace
// period, requests that arrive on open connections during the drain get 503, streams still running
// when the grace ends get an error event and [DONE], and the process exits 0.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "raw_connection.h"
#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr milliseconds kPatience{300'000};

// Long enough for a loaded machine to finish what was in flight when the drain began, and to send
// the rest of a request it had begun.
const std::vector<std::string> kPatientServer = {"--shutdown-grace-seconds", "300", "--http-header-timeout", "300",
                                                 "--http-body-timeout", "300", "--http-keepalive-timeout", "300"};

std::string post(const std::string& path, const json& body) { return json_post_bytes(path, body.dump()); }

// Greedy on this prompt, the tiny model falls into a loop that never emits end-of-generation, so
// the completion lasts until max_tokens or the context's end.
std::string endless_completion(int max_tokens, bool stream) {
  // ignore_eos: the reply runs to max_tokens whatever end-of-generation token the weights favour.
  return post("/v1/completions", {{"prompt", "Count forever"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream},
                                  {"ignore_eos", true}});
}

std::string small_chat() {
  return post("/v1/chat/completions",
              {{"messages", json::array({{{"role", "user"}, {"content", "Hello there"}}})}, {"max_tokens", 8}, {"temperature", 0}});
}

const std::string kHealth = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

bool exits_within(ServerProcess& server, milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (server.running()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

// Called after the test's connections are closed: a server lingers a moment after its last answer
// on a connection whose client keeps it open.
void expect_clean_exit(ServerProcess& server, milliseconds limit = kPatience) {
  ASSERT_TRUE(exits_within(server, limit)) << server.log();
  EXPECT_EQ(server.exit_status(), 0) << server.log();
}

// The drain's log line when one request was in flight as it began (not finished before the signal).
constexpr std::string_view kOneInFlight = "(1 requests in flight)";

// True once a new connection is refused: the listener is closed, which the server does in the same
// step as deciding what happens to every open connection.
bool draining_within(const ServerProcess& server, milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (RawConnection(server.port()).connected()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

// The server accepts connections in the order they arrived, so once a newer connection has its
// /health answered, every connection opened before it is accepted, and what was sent on them
// before (over loopback, in the server's socket when send() returns) is the server's.
bool earlier_connections_accepted(const ServerProcess& server) {
  RawConnection probe(server.port());
  probe.send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  return probe.read_for(kPatience).starts_with("HTTP/1.1 200");
}

double metric(const ServerProcess& server, const std::string& name) {
  auto client = server.client();
  const auto res = client->Get("/metrics");
  return res ? metric_value(res->body, name) : -1;
}

bool generation_running_within(const ServerProcess& server, milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (metric(server, "prefixd_requests_running") < 1) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

struct Reply {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};

// The complete responses (each with a Content-Length body) at the start of what a connection
// received, in order.
std::vector<Reply> replies_in(std::string_view received) {
  std::vector<Reply> replies;
  while (received.starts_with("HTTP/1.")) {
    const auto head_end = received.find("\r\n\r\n");
    if (head_end == std::string_view::npos || head_end < 12) break;
    Reply reply;
    reply.head = std::string(received.substr(0, head_end + 2));
    reply.status = std::stoi(reply.head.substr(9, 3));
    constexpr std::string_view kLength = "\r\nContent-Length: ";
    const auto length_at = reply.head.find(kLength);
    const std::size_t length = length_at == std::string::npos ? 0 : std::stoul(reply.head.substr(length_at + kLength.size()));
    if (received.size() < head_end + 4 + length) break;
    reply.body = std::string(received.substr(head_end + 4, length));
    received.remove_prefix(head_end + 4 + length);
    replies.push_back(std::move(reply));
  }
  return replies;
}

// Reads until one whole response is in (or the server closes, or `limit` passes).
std::string read_one_reply(RawConnection& connection, milliseconds limit) {
  std::string received;
  while (replies_in(received).empty()) {
    const std::string more = connection.read_for(limit, 1);
    if (more.empty()) break;
    received += more;
  }
  return received;
}

bool closes_connection(const Reply& reply) { return reply.head.find("\r\nConnection: close\r\n") != std::string::npos; }

// The transport's answer to a request that arrives during the drain.
void expect_shutting_down(const Reply& reply) {
  EXPECT_EQ(reply.status, 503) << reply.head << reply.body;
  const json body = json::parse(reply.body, nullptr, false);
  ASSERT_TRUE(body.contains("error")) << reply.body;
  EXPECT_EQ(body["error"].value("code", ""), "server_shutting_down") << reply.body;
}

// Reads until the server closes the connection: one answer came, the drain's 503, which said so.
void expect_only_a_closing_503(RawConnection& connection) {
  const std::string received = connection.read_for(kPatience);
  const auto replies = replies_in(received);
  ASSERT_EQ(replies.size(), 1u) << received;
  expect_shutting_down(replies[0]);
  EXPECT_TRUE(closes_connection(replies[0])) << replies[0].head;
}

TEST(Shutdown, StreamsStillRunningAtTheEndOfTheGraceGetAnErrorEventAndDone) {
  ServerProcess server({.extra_args = {"--shutdown-grace-seconds", "1"}, .ctx_size = 32768});
  RawConnection stream(server.port());
  stream.send(endless_completion(30000, true));
  // The stream is under way before the signal.
  std::string received = stream.read_for(milliseconds(30000), 400);
  ASSERT_NE(received.find("data: {"), std::string::npos) << received;
  ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
  received += stream.read_for(milliseconds(30000));
  EXPECT_NE(received.find("\"server_shutting_down\""), std::string::npos) << received.substr(received.size() - std::min<std::size_t>(received.size(), 600));
  EXPECT_NE(received.find("data: [DONE]"), std::string::npos);
  EXPECT_TRUE(received.ends_with("0\r\n\r\n")) << "the chunked body must be terminated";
  expect_clean_exit(server, milliseconds(30000));
}

TEST(Shutdown, RequestsFinishWithinTheGraceAndNewConnectionsAreRefused) {
  ServerProcess server({.extra_args = kPatientServer, .ctx_size = 4096});
  {
    RawConnection stream(server.port());
    stream.send(endless_completion(2000, true));
    std::string received = stream.read_for(kPatience, 200);
    ASSERT_FALSE(received.empty());
    ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
    EXPECT_TRUE(draining_within(server, kPatience)) << "new connections are refused";
    received += stream.read_for(kPatience);  // until the server closes
    EXPECT_NE(server.log().find(kOneInFlight), std::string::npos) << server.log();
    EXPECT_NE(received.find("\"finish_reason\":\"length\""), std::string::npos) << received;
    EXPECT_EQ(received.find("server_shutting_down"), std::string::npos);
    EXPECT_NE(received.find("data: [DONE]"), std::string::npos);
  }
  expect_clean_exit(server);
}

TEST(Shutdown, PipelinedRequestsBehindOneInFlightAreEachAnswered503AfterIt) {
  ServerProcess server({.extra_args = kPatientServer, .ctx_size = 4096});
  {
    RawConnection connection(server.port());
    connection.send(endless_completion(2000, false) + small_chat() + kHealth);
    ASSERT_TRUE(generation_running_within(server, kPatience)) << server.log();
    ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
    const std::string received = connection.read_for(kPatience);  // until the server closes
    EXPECT_NE(server.log().find(kOneInFlight), std::string::npos) << server.log();
    const auto replies = replies_in(received);
    ASSERT_EQ(replies.size(), 3u) << received.substr(0, 2000);
    EXPECT_EQ(replies[0].status, 200) << replies[0].head;
    EXPECT_NE(replies[0].body.find("\"finish_reason\":\"length\""), std::string::npos) << replies[0].body;
    EXPECT_FALSE(closes_connection(replies[0])) << "requests are waiting behind it: " << replies[0].head;
    expect_shutting_down(replies[1]);
    EXPECT_FALSE(closes_connection(replies[1])) << "a request is waiting behind it: " << replies[1].head;
    expect_shutting_down(replies[2]);
    EXPECT_TRUE(closes_connection(replies[2])) << replies[2].head;
  }
  expect_clean_exit(server);
}

TEST(Shutdown, RequestsHalfSentWhenTheDrainBeginsAreAnswered503AndIdleConnectionsClosed) {
  ServerProcess server({.extra_args = kPatientServer});
  {
    const std::string request = small_chat();
    const std::size_t head_size = request.find("\r\n\r\n") + 4;
    RawConnection idle(server.port());
    RawConnection half_headers(server.port());
    RawConnection half_body(server.port());
    const std::size_t headers_sent = head_size / 2;
    const std::size_t body_sent = head_size + (request.size() - head_size) / 2;
    ASSERT_TRUE(half_headers.send(request.substr(0, headers_sent)));
    ASSERT_TRUE(half_body.send(request.substr(0, body_sent)));
    ASSERT_TRUE(earlier_connections_accepted(server)) << server.log();

    ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
    ASSERT_TRUE(draining_within(server, kPatience)) << server.log();
    EXPECT_TRUE(idle.closed_by_peer_within(kPatience)) << "a connection that sent nothing is closed";
    ASSERT_TRUE(half_headers.send(request.substr(headers_sent)));
    ASSERT_TRUE(half_body.send(request.substr(body_sent)));
    for (RawConnection* connection : {&half_headers, &half_body}) {
      SCOPED_TRACE(connection == &half_headers ? "half the headers sent before the drain" : "half the body sent before the drain");
      expect_only_a_closing_503(*connection);
    }
  }
  expect_clean_exit(server);
}

TEST(Shutdown, AKeepAliveConnectionGets503ForTheRequestItHadBegunAndAnIdleOneIsClosed) {
  ServerProcess server({.extra_args = kPatientServer});
  {
    RawConnection busy(server.port());
    RawConnection idle(server.port());
    for (RawConnection* connection : {&busy, &idle}) {
      connection->send(kHealth);
      const auto replies = replies_in(read_one_reply(*connection, kPatience));
      ASSERT_EQ(replies.size(), 1u);
      ASSERT_EQ(replies[0].status, 200);
      ASSERT_FALSE(closes_connection(replies[0])) << replies[0].head;
    }
    ASSERT_TRUE(busy.send("GET /v1/models HTTP/1.1\r\nHost: x\r\n"));  // the blank line ending it comes after the drain began
    ASSERT_TRUE(earlier_connections_accepted(server)) << server.log();

    ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
    ASSERT_TRUE(draining_within(server, kPatience)) << server.log();
    EXPECT_TRUE(idle.closed_by_peer_within(kPatience)) << "a kept-alive connection with nothing sent is closed";
    ASSERT_TRUE(busy.send("\r\n"));
    expect_only_a_closing_503(busy);
  }
  expect_clean_exit(server);
}

TEST(Shutdown, RequestsStillArrivingWhenTheGraceEndsAreClosedUnanswered) {
  // The timeouts are far longer than the test waits: only the end of the grace can close them.
  constexpr milliseconds kLimit{60'000};
  ServerProcess server({.extra_args = {"--shutdown-grace-seconds", "1", "--http-header-timeout", "3600",
                                       "--http-body-timeout", "3600"}});
  {
    const std::string request = small_chat();
    const std::size_t head_size = request.find("\r\n\r\n") + 4;
    RawConnection half_headers(server.port());
    RawConnection half_body(server.port());
    ASSERT_TRUE(half_headers.send(request.substr(0, head_size / 2)));
    ASSERT_TRUE(half_body.send(request.substr(0, head_size + 1)));
    ASSERT_TRUE(earlier_connections_accepted(server)) << server.log();
    ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
    for (RawConnection* connection : {&half_headers, &half_body}) {
      SCOPED_TRACE(connection == &half_headers ? "half the headers sent" : "half the body sent");
      EXPECT_EQ(connection->read_for(kLimit), "") << "no answer";
      EXPECT_TRUE(connection->closed_by_peer_within(milliseconds(1000))) << "closed, not still waiting";
    }
  }
  expect_clean_exit(server, kLimit);
}

}  // namespace
}  // namespace prefixd::testing
