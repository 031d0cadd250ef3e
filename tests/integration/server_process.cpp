#include "server_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace prefixd::testing {

ServerProcess::ServerProcess(ServerConfig config) {
  char log_template[] = "/tmp/prefixd-test-server-XXXXXX";
  const int log_fd = ::mkstemp(log_template);
  if (log_fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(log_fd);
  log_path_ = log_template;

  bench::ServerLaunch launch;
  launch.binary = PREFIXD_BINARY;
  // An empty model: the test names it another way (--hf-repo).
  launch.args = {"serve", "--host", "127.0.0.1", "--port", "", "--ctx-size", std::to_string(config.ctx_size),
                 "--parallel", std::to_string(config.parallel)};
  constexpr std::size_t kPortArg = 4;
  if (!config.model.empty()) launch.args.insert(launch.args.end(), {"--model", config.model});
  launch.args.insert(launch.args.end(), config.extra_args.begin(), config.extra_args.end());
  launch.log_path = log_path_;
  launch.startup_limit = std::chrono::seconds(config.startup_seconds);
  launch.extra_env = std::move(config.env);  // a developer's PREFIXD_* settings are stripped first
  // Tests leave the user's model fingerprint cache (~/.cache/prefixd) alone unless they ask for it.
  if (std::ranges::none_of(launch.extra_env, [](const auto& kv) { return kv.first == "PREFIXD_MODEL_FINGERPRINT_CACHE"; })) {
    launch.extra_env.emplace_back("PREFIXD_MODEL_FINGERPRINT_CACHE", "off");
  }
  // The disk tier is on by default, at the user's cache directory: a test server keeps none unless
  // its test names one (--cache-disk-path, or the variables), so no test reads another's files.
  const auto named = [&](std::string_view flag) {
    return std::ranges::any_of(config.extra_args, [&](const std::string& a) { return a == flag || a.starts_with(std::string(flag) + "="); });
  };
  const auto in_env = [&](std::string_view name) {
    return std::ranges::any_of(launch.extra_env, [&](const auto& kv) { return kv.first == name; });
  };
  if (!named("--cache-disk-path") && !named("--cache-disk") && !named("--no-cache-disk") &&
      !in_env("PREFIXD_CACHE_DISK") && !in_env("PREFIXD_CACHE_DISK_PATH")) {
    launch.extra_env.emplace_back("PREFIXD_CACHE_DISK", "false");
  }
  // Every test server checks the prompt cache's invariants after each cache operation and aborts
  // on a violation (--debug-verify-cache), so the whole suite runs in the checked configuration.
  if (std::ranges::none_of(launch.extra_env, [](const auto& kv) { return kv.first == "PREFIXD_DEBUG_VERIFY_CACHE"; })) {
    launch.extra_env.emplace_back("PREFIXD_DEBUG_VERIFY_CACHE", "1");
  }
  // A request that sends no seed samples with a fixed one, so every run of the suite sees the same
  // replies; a test that wants another sets PREFIXD_SEED or passes --seed itself.
  const bool seeded = std::ranges::any_of(config.extra_args, [](const std::string& a) { return a == "--seed" || a == "-s"; });
  if (!seeded && std::ranges::none_of(launch.extra_env, [](const auto& kv) { return kv.first == "PREFIXD_SEED"; })) {
    launch.extra_env.emplace_back("PREFIXD_SEED", "20241201");
  }
  // One compute thread unless a test asks for more: ggml's threads meet at a spinning barrier after
  // every operation, so two of them on a loaded machine (ctest -j 2 already runs two servers on two
  // cores) wait for each other's time slices, and a test that takes a second alone takes minutes.
  const bool threaded = std::ranges::any_of(config.extra_args, [](const std::string& a) { return a == "--threads" || a == "-t"; });
  if (!threaded && std::ranges::none_of(launch.extra_env, [](const auto& kv) { return kv.first == "PREFIXD_THREADS"; })) {
    launch.extra_env.emplace_back("PREFIXD_THREADS", "1");
  }
  // A port found free can still be taken by another listener before the server binds it; the
  // server then exits at startup saying so, and the launch is tried again on another port.
  constexpr int kLaunchAttempts = 4;
  for (int attempt = 1;; ++attempt) {
    const int port = pick_free_port();
    launch.args[kPortArg] = std::to_string(port);
    try {
      process_ = std::make_unique<bench::ServerProcess>(launch, port);
      return;
    } catch (const std::exception& e) {
      const bool port_taken = std::string_view(e.what()).find("Address already in use") != std::string_view::npos;
      if (port_taken && attempt < kLaunchAttempts) continue;
      ::unlink(log_path_.c_str());
      throw;
    }
  }
}

ServerProcess::~ServerProcess() {
  process_.reset();  // stops and reaps the server before its log goes
  ::unlink(log_path_.c_str());
}

std::unique_ptr<httplib::Client> ServerProcess::client(const std::string& api_key) const {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port());
  client->set_connection_timeout(std::chrono::seconds(5));
  client->set_read_timeout(std::chrono::seconds(120));
  client->set_write_timeout(std::chrono::seconds(10));
  if (!api_key.empty()) client->set_bearer_token_auth(api_key);
  return client;
}

std::string ServerProcess::log() const { return process_->log(); }

namespace {

JsonReply post_text(httplib::Client& client, const std::string& path, const std::string& body) {
  JsonReply reply;
  auto res = client.Post(path, body, "application/json");
  if (!res) {
    // Status 0: the request got no answer; say why, so a failure names its cause.
    reply.raw = "no HTTP answer: " + httplib::to_string(res.error());
    return reply;
  }
  reply.status = res->status;
  reply.raw = res->body;
  reply.body = nlohmann::json::parse(res->body, nullptr, false);
  return reply;
}

}  // namespace

JsonReply post_json(httplib::Client& client, const std::string& path, const nlohmann::json& body) {
  return post_text(client, path, body.dump());
}

JsonReply post_ordered_json(httplib::Client& client, const std::string& path, const nlohmann::ordered_json& body) {
  return post_text(client, path, body.dump());
}

JsonReply get_json(httplib::Client& client, const std::string& path) {
  JsonReply reply;
  auto res = client.Get(path);
  if (!res) {
    // Status 0: the request got no answer; say why, so a failure names its cause.
    reply.raw = "no HTTP answer: " + httplib::to_string(res.error());
    return reply;
  }
  reply.status = res->status;
  reply.raw = res->body;
  reply.body = nlohmann::json::parse(res->body, nullptr, false);
  return reply;
}

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> payloads;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("data: ")) payloads.push_back(line.substr(6));
  }
  return payloads;
}

double metric_value(const std::string& metrics_text, const std::string& name) {
  std::istringstream in(metrics_text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(name + " ")) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

std::vector<std::pair<std::string, nlohmann::json>> sse_events(const std::string& body) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  std::istringstream in(body);
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.starts_with("event: ")) name = line.substr(7);
    if (line.starts_with("data: ")) out.emplace_back(name, nlohmann::json::parse(line.substr(6), nullptr, false));
  }
  return out;
}

CommandResult run_shell(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) result.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace prefixd::testing
