// `prefixd route` in front of three real backends on loopback: sessions stay on one backend and
// hit its cache, a new session goes where its shared system prompt is cached, a backend killed
// mid-run costs no request, and a stream through the router reads as one straight from a backend.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

// `prefixd route` as a child process, stopped and reaped with its owner.
class RouterProcess {
 public:
  RouterProcess(const std::vector<const ServerProcess*>& backends, std::vector<std::string> extra_args) {
    char log_template[] = "/tmp/prefixd-test-router-XXXXXX";
    const int fd = ::mkstemp(log_template);
    ::close(fd);
    log_path_ = log_template;
    const int port = pick_free_port();
    bench::ServerLaunch launch;
    launch.binary = PREFIXD_BINARY;
    launch.args = {"route", "--host", "127.0.0.1", "--port", std::to_string(port)};
    for (const char* interval : {"--summary-interval-ms", "--health-interval-ms"}) {
      if (std::ranges::find(extra_args, interval) == extra_args.end()) launch.args.insert(launch.args.end(), {interval, "200"});
    }
    for (const ServerProcess* b : backends) {
      launch.args.push_back("--backend");
      launch.args.push_back("http://127.0.0.1:" + std::to_string(b->port()));
    }
    launch.args.insert(launch.args.end(), extra_args.begin(), extra_args.end());
    launch.log_path = log_path_;
    launch.startup_limit = std::chrono::seconds(60);
    process_ = std::make_unique<bench::ServerProcess>(std::move(launch), port);
  }
  ~RouterProcess() {
    process_.reset();
    ::unlink(log_path_.c_str());
  }
  std::unique_ptr<httplib::Client> client() const {
    auto client = std::make_unique<httplib::Client>("127.0.0.1", process_->port());
    client->set_read_timeout(std::chrono::seconds(120));
    return client;
  }
  std::string log() const { return process_->log(); }

 private:
  std::string log_path_;
  std::unique_ptr<bench::ServerProcess> process_;
};

struct Cluster {
  std::array<std::unique_ptr<ServerProcess>, 3> backends;
  Cluster() {
    for (auto& b : backends) b = std::make_unique<ServerProcess>();
  }
  std::vector<const ServerProcess*> list() const { return {backends[0].get(), backends[1].get(), backends[2].get()}; }
  // Requests each backend's scheduler admitted.
  std::vector<double> requests() const {
    std::vector<double> out;
    for (const auto& b : backends) {
      auto client = b->client();
      const auto res = client->Get("/metrics");
      out.push_back(res ? metric_value(res->body, "prefixd_requests_total") : -1);
    }
    return out;
  }
};

std::string system_prompt(const std::string& topic) {
  std::string system = "You are a careful " + topic + " assistant. ";
  for (int i = 0; i < 24; ++i) system += "Rule " + std::to_string(i) + " about " + topic + ": answer briefly. ";
  return system;
}

json chat(const json& messages, const std::string& session, int max_tokens = 4) {
  return {{"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}, {"prompt_cache_key", session}};
}

int cached_tokens(const JsonReply& reply) {
  return reply.body["usage"]["prompt_tokens_details"].value("cached_tokens", 0);
}

// The backend whose admitted-request count grew between two snapshots (-1: none or several).
int grown(const std::vector<double>& before, const std::vector<double>& after) {
  int which = -1;
  for (int i = 0; i < static_cast<int>(before.size()); ++i) {
    if (after[i] > before[i]) {
      if (which >= 0) return -1;
      which = i;
    }
  }
  return which;
}

TEST(Router, ASessionStaysOnOneBackendAndItsLaterTurnsHit) {
  Cluster cluster;
  RouterProcess router(cluster.list(), {});
  auto client = router.client();
  json messages = json::array({{{"role", "system"}, {"content", system_prompt("geology")}},
                               {{"role", "user"}, {"content", "What is basalt?"}}});
  const std::vector<double> start = cluster.requests();
  for (int turn = 0; turn < 3; ++turn) {
    const JsonReply reply = post_json(*client, "/v1/chat/completions", chat(messages, "session-a"));
    ASSERT_EQ(reply.status, 200) << reply.raw << router.log();
    if (turn > 0) {
      EXPECT_GT(cached_tokens(reply), 100) << "turn " << turn;
    }
    messages.push_back({{"role", "assistant"}, {"content", reply.body["choices"][0]["message"]["content"]}});
    messages.push_back({{"role", "user"}, {"content", "And question " + std::to_string(turn) + "?"}});
  }
  const std::vector<double> end = cluster.requests();
  const int home = grown(start, end);
  ASSERT_GE(home, 0) << "the session's turns went to several backends";
  EXPECT_EQ(end[static_cast<std::size_t>(home)] - start[static_cast<std::size_t>(home)], 3);

  const auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metric_value(metrics->body, "prefixd_router_decisions_total{reason=\"session\"}"), 2);
}

// Session A's system prompt lands on one backend; session B with the same system prompt follows it
// there under the prefix policy (and is a cache hit), and goes elsewhere under round-robin.
int backend_of_second_session(const std::string& policy, bool* second_hit) {
  Cluster cluster;
  RouterProcess router(cluster.list(), {"--policy", policy});
  auto client = router.client();
  const std::string system = system_prompt("astronomy");
  const auto first = cluster.requests();
  const JsonReply a = post_json(*client, "/v1/chat/completions",
                                chat(json::array({{{"role", "system"}, {"content", system}},
                                                  {{"role", "user"}, {"content", "What is a quasar?"}}}),
                                     "session-a"));
  EXPECT_EQ(a.status, 200) << a.raw;
  const auto middle = cluster.requests();
  const JsonReply b = post_json(*client, "/v1/chat/completions",
                                chat(json::array({{{"role", "system"}, {"content", system}},
                                                  {{"role", "user"}, {"content", "How far is the moon?"}}}),
                                     "session-b"));
  EXPECT_EQ(b.status, 200) << b.raw;
  const auto last = cluster.requests();
  *second_hit = cached_tokens(b) > 100;
  const int home_a = grown(first, middle);
  const int home_b = grown(middle, last);
  EXPECT_GE(home_a, 0);
  EXPECT_GE(home_b, 0);
  return home_a == home_b ? 1 : 0;
}

// Backends that publish KV events: the router follows them, so it learns of a prefix a backend
// cached from a request that did not pass through it, with no summary poll after startup; the same
// router polling summaries (none within the test) does not, and sends the session elsewhere.
int backend_of_a_prefix_cached_behind_the_router(bool kv_events) {
  std::array<std::unique_ptr<ServerProcess>, 3> backends;
  for (auto& b : backends) {
    b = std::make_unique<ServerProcess>(ServerConfig{
        .extra_args = {"--kv-events-endpoint", "tcp://*:" + std::to_string(pick_free_port()),
                       "--kv-events-replay-endpoint", "tcp://*:" + std::to_string(pick_free_port())}});
  }
  RouterProcess router({backends[0].get(), backends[1].get(), backends[2].get()},
                       {"--summary-interval-ms", "3600000", kv_events ? "--kv-events" : "--no-kv-events"});
  auto client = router.client();
  const auto blocks_known = [&] {
    const auto metrics = client->Get("/metrics");
    const std::string backend = "http://127.0.0.1:" + std::to_string(backends[2]->port());
    return metrics ? metric_value(metrics->body, "prefixd_router_backend_summary_blocks{backend=\"" + backend + "\"}") : -1;
  };
  EXPECT_EQ(blocks_known(), 0);
  const std::string system = system_prompt("geology");
  auto direct = backends[2]->client();
  const JsonReply warm = post_json(*direct, "/v1/chat/completions",
                                   chat(json::array({{{"role", "system"}, {"content", system}},
                                                     {{"role", "user"}, {"content", "What is basalt?"}}}),
                                        "direct"));
  EXPECT_EQ(warm.status, 200) << warm.raw;
  if (kv_events) {
    // Events arrive within the backend's interval; wait for them, not for a fixed time.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (blocks_known() <= 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_GT(blocks_known(), 0) << router.log();
    EXPECT_NE(router.log().find("following its KV events"), std::string::npos) << router.log();
  }
  std::vector<double> start;
  for (const auto& b : backends) {
    const auto res = b->client()->Get("/metrics");
    start.push_back(res ? metric_value(res->body, "prefixd_requests_total") : -1);
  }
  const JsonReply routed = post_json(*client, "/v1/chat/completions",
                                     chat(json::array({{{"role", "system"}, {"content", system}},
                                                       {{"role", "user"}, {"content", "What is granite?"}}}),
                                          "routed"));
  EXPECT_EQ(routed.status, 200) << routed.raw;
  std::vector<double> end;
  for (const auto& b : backends) {
    const auto res = b->client()->Get("/metrics");
    end.push_back(res ? metric_value(res->body, "prefixd_requests_total") : -1);
  }
  if (kv_events) {
    EXPECT_GT(cached_tokens(routed), 100);
  }
  return grown(start, end);
}

TEST(Router, FollowsTheBackendsKvEventsInsteadOfPollingTheirSummaries) {
  EXPECT_EQ(backend_of_a_prefix_cached_behind_the_router(true), 2);
  EXPECT_NE(backend_of_a_prefix_cached_behind_the_router(false), 2);
}

// A schema the server will not build is the client's mistake: its 400 comes back as it is, and the
// router tries no other backend (it retries server faults only).
TEST(Router, AClientMistakeIsAnsweredOnceAndNotRetried) {
  Cluster cluster;
  RouterProcess router(cluster.list(), {});
  auto client = router.client();
  const json schema = json::parse(R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}})");
  json body = chat(json::array({{{"role", "user"}, {"content", "Pick one."}}}), "mistake");
  body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}};
  const JsonReply reply = post_json(*client, "/v1/chat/completions", body);
  EXPECT_EQ(reply.status, 400) << reply.raw;
  EXPECT_NE(reply.raw.find("$.$defs.a.$ref"), std::string::npos) << reply.raw;
  const auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metric_value(metrics->body, "prefixd_router_retries_total"), 0) << metrics->body;
}

TEST(Router, ANewSessionGoesWhereItsSharedSystemPromptIs) {
  bool hit = false;
  EXPECT_EQ(backend_of_second_session("prefix", &hit), 1);
  EXPECT_TRUE(hit);
  EXPECT_EQ(backend_of_second_session("round_robin", &hit), 0);
  EXPECT_FALSE(hit);
}

TEST(Router, ABackendKilledMidRunCostsNoRequest) {
  Cluster cluster;
  // Health checks far apart: requests meet the dead backend before any check drains it.
  RouterProcess router(cluster.list(), {"--health-interval-ms", "60000"});
  std::atomic<int> failed{0}, served{0};
  std::atomic<bool> stop{false};
  std::vector<std::jthread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      auto client = router.client();
      for (int i = 0; !stop.load(); ++i) {
        const json messages = json::array({{{"role", "system"}, {"content", system_prompt("topic " + std::to_string(c))}},
                                           {{"role", "user"}, {"content", "Question " + std::to_string(i)}}});
        const JsonReply reply = post_json(*client, "/v1/chat/completions", chat(messages, "client-" + std::to_string(c), 8));
        (reply.status == 200 ? served : failed).fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const bool killed = ::kill(cluster.backends[0]->pid(), SIGKILL) == 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  stop = true;
  for (auto& t : clients) t.join();
  ASSERT_TRUE(killed);
  EXPECT_EQ(failed.load(), 0) << router.log();
  EXPECT_GE(served.load(), 4);
  const auto metrics = router.client()->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_GE(metric_value(metrics->body, "prefixd_router_retries_total"), 1);
  EXPECT_EQ(metric_value(metrics->body, "prefixd_router_backend_healthy{backend=\"http://127.0.0.1:" +
                                            std::to_string(cluster.backends[0]->port()) + "\"}"),
            0);
}

std::string streamed_text(httplib::Client& client, json request) {
  request["stream"] = true;
  const auto res = client.Post("/v1/chat/completions", request.dump(), "application/json");
  if (!res || res->status != 200) return "<failed>";
  std::string text;
  bool done = false;
  for (const std::string& payload : sse_payloads(res->body)) {
    if (payload == "[DONE]") {
      done = true;
      continue;
    }
    const json chunk = json::parse(payload);
    for (const auto& choice : chunk.value("choices", json::array())) {
      if (choice.contains("delta") && choice["delta"].contains("content") && choice["delta"]["content"].is_string()) {
        text += choice["delta"]["content"].get<std::string>();
      }
    }
  }
  return done ? text : "<no [DONE]>";
}

TEST(Router, AStreamThroughTheRouterReadsAsOneFromABackend) {
  Cluster cluster;
  RouterProcess router(cluster.list(), {});
  const json request = chat(json::array({{{"role", "user"}, {"content", "Tell me a story about a lighthouse."}}}),
                            "stream-session", 24);
  auto direct = cluster.backends[1]->client();
  const std::string expected = streamed_text(*direct, request);
  ASSERT_NE(expected, "<failed>");
  EXPECT_EQ(streamed_text(*router.client(), request), expected);

  auto client = router.client();
  EXPECT_EQ(get_json(*client, "/v1/models").status, 200);
  const JsonReply missing = get_json(*client, "/v1/nothing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_TRUE(missing.body["error"].contains("message"));
}

TEST(Router, AStreamWhoseBackendDiesMidwayEndsWithAnErrorEvent) {
  ServerProcess backend;
  RouterProcess router({&backend}, {});
  auto client = router.client();
  json request = chat(json::array({{{"role", "user"}, {"content", "Write a very long story."}}}), "cut-session", 1500);
  request["stream"] = true;
  std::string body;
  bool killed = false;
  const auto res = client->Post("/v1/chat/completions", httplib::Headers{}, request.dump(), "application/json",
                                [&](const char* data, std::size_t length) {
                                  body.append(data, length);
                                  if (!killed && body.find("data: ") != std::string::npos) {
                                    killed = ::kill(backend.pid(), SIGKILL) == 0;
                                  }
                                  return true;
                                });
  ASSERT_TRUE(killed);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const std::vector<std::string> payloads = sse_payloads(body);
  ASSERT_FALSE(payloads.empty());
  EXPECT_NE(payloads.back(), "[DONE]");
  EXPECT_NE(payloads.back().find("upstream_failed"), std::string::npos) << payloads.back();
}

}  // namespace
}  // namespace prefixd::testing
