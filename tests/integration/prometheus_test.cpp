// /metrics as Prometheus reads it: promtool's linter passes the text of a server that has served
// chats; and a real Prometheus scraping a running server evaluates every panel expression of the
// Grafana dashboard (docs/grafana/prefixd.json) and every rule (docs/prometheus/prefixd-rules.yml)
// without error, each panel returning data after a short workload.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"
#include "valkey_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kSource = PREFIXD_SOURCE_DIR;

fs::path temp_dir(const std::string& stem) {
  std::string name = "/tmp/" + stem + "-XXXXXX";
  if (::mkdtemp(name.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return name;
}

void chat_turns(httplib::Client& client, int conversations) {
  for (int c = 0; c < conversations; ++c) {
    json request = {{"messages", json::array({{{"role", "system"}, {"content", "You keep the archive of letters and answer briefly."}},
                                              {{"role", "user"}, {"content", "Where are the letters of " + std::to_string(1900 + c) + "?"}}})},
                    {"max_tokens", 4},
                    {"temperature", 0}};
    for (int turn = 0; turn < 2; ++turn) {
      const auto reply = post_json(client, "/v1/chat/completions", request);
      ASSERT_EQ(reply.status, 200) << reply.raw;
      request["messages"].push_back({{"role", "assistant"}, {"content", reply.body["choices"][0]["message"]["content"]}});
      request["messages"].push_back({{"role", "user"}, {"content", "And the next year?"}});
    }
  }
}

// What the Kubernetes inference gateway's endpoint picker reads (its model-server protocol): queued
// and running requests, the fraction of KV cells running requests hold, and the cache's block
// layout. Idle, nothing runs and nothing is used; while a reply is generated, its cells are.
TEST(Prometheus, TheModelServerProtocolsGaugesFollowWhatRuns) {
  ServerProcess server({.parallel = 2, .ctx_size = 2048});
  auto client = server.client();
  const auto metrics = [&] { return get_json(*client, "/metrics").raw; };
  const std::string idle = metrics();
  EXPECT_EQ(metric_value(idle, "prefixd_requests_running"), 0);
  EXPECT_EQ(metric_value(idle, "prefixd_requests_queued"), 0);
  EXPECT_EQ(metric_value(idle, "prefixd_kv_cache_usage_ratio"), 0);
  EXPECT_EQ(metric_value(idle, "prefixd_cache_config_info{block_size=\"16\",num_gpu_blocks=\"128\"}"), 1) << idle;
  auto reply = std::async(std::launch::async, [&server] {
    auto own = server.client();
    return post_json(*own, "/v1/completions",
                     {{"prompt", "count the stars one by one"}, {"max_tokens", 1900}, {"ignore_eos", true}, {"temperature", 0}});
  });
  double ratio = 0;
  for (int i = 0; i < 2000 && ratio == 0; ++i) {
    const std::string busy = metrics();
    if (metric_value(busy, "prefixd_requests_running") == 1) ratio = metric_value(busy, "prefixd_kv_cache_usage_ratio");
  }
  EXPECT_GT(ratio, 0) << "never saw the running request's cells";
  EXPECT_LE(ratio, 1);
  ASSERT_EQ(reply.get().status, 200);
  double after = -1;
  for (int i = 0; i < 2000 && after != 0; ++i) after = metric_value(metrics(), "prefixd_kv_cache_usage_ratio");
  EXPECT_EQ(after, 0) << "the cells of a finished request still count as used";
}

TEST(Prometheus, PromtoolFindsNothingToLintInTheMetricsText) {
  ServerProcess server;
  auto client = server.client();
  chat_turns(*client, 2);
  const std::string text = client->Get("/metrics")->body;
  // The field's counters agree with prefixd's own: every request here looked the cache up.
  EXPECT_GT(metric_value(text, "prefixd_prefix_cache_hits_total"), 0);
  EXPECT_EQ(metric_value(text, "prefixd_prefix_cache_hits_total"),
            metric_value(text, "prefixd_prompt_cache_prefix_tokens_reused_total"));
  EXPECT_EQ(metric_value(text, "prefixd_prefix_cache_queries_total"), metric_value(text, "prefixd_prompt_tokens_total"));
  double by_tier = 0;
  for (const char* tier : {"device", "host", "disk", "remote"}) {
    by_tier += metric_value(text, std::string("prefixd_prefix_cache_hit_tokens_total{tier=\"") + tier + "\"}");
  }
  EXPECT_EQ(by_tier, metric_value(text, "prefixd_prefix_cache_hits_total"));
  double by_outcome = 0;
  for (const char* outcome : {"cold", "hit_extend", "hit_restore", "partial", "bypass"}) {
    by_outcome += metric_value(text, std::string("prefixd_time_to_first_token_by_cache_outcome_seconds_count{outcome=\"") +
                                         outcome + "\"}");
  }
  EXPECT_EQ(by_outcome, metric_value(text, "prefixd_time_to_first_token_seconds_count"));
  EXPECT_EQ(by_outcome, 4);

  const fs::path dir = temp_dir("prefixd-promtool");
  const fs::path file = dir / "metrics.txt";
  std::ofstream(file) << text;
  const std::string output = run_command("promtool check metrics < " + file.string() + " 2>&1; echo \"exit $?\"");
  EXPECT_NE(output.find("exit 0"), std::string::npos) << output;
  EXPECT_EQ(output, "exit 0\n") << "promtool reports problems";
  fs::remove_all(dir);
}

// Where the scheduler's time goes: every step has one observation per phase, the phases' sums add
// up to the step's sum (to the text's precision), a lone request draws each of its tokens in a
// step of its own, the model's calls are compute, and the request's debug line counts its steps.
TEST(Prometheus, StepPhasesAddUpToTheStepAndEachTokenOfALoneRequestTakesADecodeStep) {
  ServerProcess server({.extra_args = {"--log-level", "debug"}});
  auto client = server.client();
  const auto metrics = [&] { return get_json(*client, "/metrics").raw; };
  const double decode_steps_before = metric_value(metrics(), "prefixd_decode_steps_total");
  ASSERT_GE(decode_steps_before, 0) << "prefixd_decode_steps_total is missing";
  constexpr int kTokens = 24;
  const auto reply = post_json(*client, "/v1/completions",
                               {{"prompt", "count the stars one by one"}, {"max_tokens", kTokens}, {"ignore_eos", true}, {"temperature", 0}});
  ASSERT_EQ(reply.status, 200) << reply.raw;
  ASSERT_EQ(reply.body["usage"]["completion_tokens"], kTokens);
  ASSERT_EQ(reply.body["choices"][0]["finish_reason"], "length");
  // The step that ended the reply is recorded as the scheduler's loop turns after it.
  std::string text = metrics();
  for (int i = 0; i < 500 && metric_value(text, "prefixd_decode_steps_total") - decode_steps_before < kTokens; ++i) {
    std::this_thread::sleep_for(10ms);
    text = metrics();
  }
  EXPECT_EQ(metric_value(text, "prefixd_decode_steps_total") - decode_steps_before, kTokens);
  const double steps = metric_value(text, "prefixd_step_seconds_count");
  EXPECT_GE(steps, kTokens);
  double phase_sums = 0;
  for (const char* phase : {"compute", "sampling", "output", "cache", "scheduling"}) {
    const std::string labels = std::string("{phase=\"") + phase + "\"}";
    EXPECT_EQ(metric_value(text, "prefixd_step_phase_seconds_count" + labels), steps) << phase;
    const double sum = metric_value(text, "prefixd_step_phase_seconds_sum" + labels);
    EXPECT_GE(sum, 0) << phase;
    phase_sums += sum;
  }
  const double step_sum = metric_value(text, "prefixd_step_seconds_sum");
  EXPECT_GT(step_sum, 0);
  EXPECT_NEAR(phase_sums, step_sum, 1e-9 * step_sum);
  EXPECT_GT(metric_value(text, "prefixd_step_phase_seconds_sum{phase=\"compute\"}"), 0);
  EXPECT_GT(metric_value(text, "prefixd_scheduler_idle_seconds_total"), 0);

  // The finished request's debug line: "request N steps: S (compute … ms, sampling … ms, output …
  // ms, cache … ms, scheduling … ms; waits between steps … ms)".
  const std::string log = server.log();
  const size_t compute = log.find(" (compute ");
  ASSERT_NE(compute, std::string::npos) << log;
  const size_t begin = log.rfind('\n', compute) + 1;  // npos + 1 = 0: the first line
  const std::string line = log.substr(begin, log.find('\n', compute) - begin);
  for (const char* part : {"request ", " steps: ", " (compute ", " ms, sampling ", " ms, output ", " ms, cache ",
                           " ms, scheduling ", " ms; waits between steps ", " ms)"}) {
    ASSERT_NE(line.find(part), std::string::npos) << part << " in " << line;
  }
  const int line_steps = std::stoi(line.substr(line.find(" steps: ") + std::string(" steps: ").size()));
  EXPECT_GE(line_steps, kTokens) << line;
  EXPECT_LE(line_steps, steps) << line;
}

// A prometheus child scraping one target every second, with the project's rules.
class PrometheusProcess {
 public:
  PrometheusProcess(int target_port, const fs::path& dir) : port_(pick_free_port()) {
    const fs::path config = dir / "prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          << "rule_files:\n  - " << (kSource / "docs/prometheus/prefixd-rules.yml").string() << "\n"
                          << "scrape_configs:\n  - job_name: prefixd\n    static_configs:\n      - targets: ['127.0.0.1:"
                          << target_port << "']\n";
    std::vector<std::string> args = {"prometheus", "--config.file=" + config.string(),
                                     "--storage.tsdb.path=" + (dir / "data").string(),
                                     "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"};
    const std::string log = (dir / "prometheus.log").string();
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execvp("prometheus", argv.data());
      _exit(127);
    }
    httplib::Client client("127.0.0.1", port_);
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto ready = client.Get("/-/ready"); ready && ready->status == 200) return;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("prometheus exited at startup: " + run_command("cat " + log));
      }
      std::this_thread::sleep_for(100ms);
    }
    throw std::runtime_error("prometheus did not become ready");
  }
  ~PrometheusProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;

  // An instant query's result vector; fails the test on an error.
  json query(const std::string& expr) const {
    httplib::Client client("127.0.0.1", port_);
    const auto reply = client.Get("/api/v1/query", httplib::Params{{"query", expr}}, httplib::Headers{});
    if (!reply) return json();
    const json body = json::parse(reply->body, nullptr, false);
    EXPECT_EQ(body.value("status", ""), "success") << expr << ": " << reply->body;
    return body.contains("data") ? body["data"]["result"] : json();
  }
  json rules() const {
    httplib::Client client("127.0.0.1", port_);
    const auto reply = client.Get("/api/v1/rules");
    return reply ? json::parse(reply->body, nullptr, false) : json();
  }

 private:
  int port_;
  pid_t pid_ = -1;
};

// The dashboard's expressions with Grafana's variables as Grafana would fill them.
std::vector<std::string> panel_expressions() {
  std::ifstream in(kSource / "docs/grafana/prefixd.json");
  const json dashboard = json::parse(in);
  std::vector<std::string> out;
  for (const json& panel : dashboard["panels"]) {
    for (const json& target : panel["targets"]) {
      std::string expr = target["expr"].get<std::string>();
      for (const auto& [variable, value] : {std::pair<std::string, std::string>{"$__rate_interval", "30s"}, {"$instance", ".*"}}) {
        for (auto at = expr.find(variable); at != std::string::npos; at = expr.find(variable)) expr.replace(at, variable.size(), value);
      }
      out.push_back(expr);
    }
  }
  return out;
}

TEST(Prometheus, EveryDashboardPanelAndRuleEvaluatesAgainstARunningServer) {
  ASSERT_TRUE(have_program("prometheus")) << "prometheus is part of the build environment (scripts/sid-packages.txt)";
  const fs::path dir = temp_dir("prefixd-prometheus");
  ServerProcess server;
  auto client = server.client();
  PrometheusProcess prometheus(server.port(), dir);
  // Traffic spread over several scrapes, so that every rate has two samples with movement between.
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  int rounds = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    chat_turns(*client, 1);
    ++rounds;
    const json scrapes = prometheus.query("count_over_time(up{job=\"prefixd\"}[1m])");
    if (rounds >= 3 && scrapes.is_array() && !scrapes.empty() && std::stod(scrapes[0]["value"][1].get<std::string>()) >= 6) break;
    std::this_thread::sleep_for(500ms);
  }
  const json up = prometheus.query("up{job=\"prefixd\"}");
  ASSERT_FALSE(up.empty());
  ASSERT_EQ(up[0]["value"][1], "1") << "prometheus cannot scrape prefixd";

  const std::vector<std::string> expressions = panel_expressions();
  ASSERT_GE(expressions.size(), 20u);
  for (const std::string& expr : expressions) {
    const json result = prometheus.query(expr);
    EXPECT_TRUE(result.is_array() && !result.empty()) << "no data for " << expr;
  }

  // Every rule loaded and evaluated without error; the recording rules produce series.
  const auto rules_deadline = std::chrono::steady_clock::now() + 30s;
  json groups;
  bool evaluated = false;
  while (!evaluated && std::chrono::steady_clock::now() < rules_deadline) {
    groups = prometheus.rules()["data"]["groups"];
    evaluated = groups.is_array() && groups.size() == 2;
    for (const json& group : groups) {
      for (const json& rule : group["rules"]) evaluated = evaluated && rule.value("lastEvaluation", "").rfind("0001", 0) != 0;
    }
    if (!evaluated) std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(evaluated) << groups.dump();
  int rule_count = 0;
  for (const json& group : groups) {
    for (const json& rule : group["rules"]) {
      ++rule_count;
      EXPECT_EQ(rule["health"], "ok") << rule.dump();
      if (rule["type"] == "recording") {
        EXPECT_FALSE(prometheus.query(rule["name"].get<std::string>()).empty()) << rule["name"];
      }
    }
  }
  EXPECT_EQ(rule_count, 9);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace prefixd::testing
