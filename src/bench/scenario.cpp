#include "bench/scenario.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "bench/prompts.h"
#include "bench/stats.h"

namespace prefixd::bench {

const char* verdict_name(Check::Verdict verdict) {
  switch (verdict) {
    case Check::Verdict::pass: return "PASS";
    case Check::Verdict::fail: return "FAIL";
    case Check::Verdict::skip: return "SKIP";
  }
  return "SKIP";
}

Check make_check(std::string name, bool pass, std::string detail) {
  return Check{std::move(name), pass ? Check::Verdict::pass : Check::Verdict::fail, std::move(detail)};
}

nlohmann::json Check::to_json() const { return {{"name", name}, {"verdict", verdict_name(verdict)}, {"detail", detail}}; }

void ScenarioEnv::note(const std::string& scenario, const std::string& message) {
  progress_ << "[" << scenario << "] " << message << std::endl;  // std::endl: progress must show now
}

ServerLaunch ScenarioEnv::launch(const ServerSpec& spec, int port) const {
  ServerLaunch launch;
  // This very binary by default; resolved so that the printed command line can be rerun by hand.
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  launch.binary = !options_.server_bin.empty() ? options_.server_bin : error ? "/proc/self/exe" : self.string();
  launch.log_path = log_path_;
  launch.startup_limit = options_.startup_timeout;
  const int ctx = options_.ctx_size.value_or(spec.ctx_size);
  launch.args = {"serve",      "--model",    options_.model_path,       "--host",     "127.0.0.1",
                 "--port",     std::to_string(port), "--ctx-size", std::to_string(ctx), "--parallel",
                 std::to_string(spec.parallel)};
  if (options_.threads) {
    launch.args.push_back("--threads");
    launch.args.push_back(std::to_string(*options_.threads));
  }
  launch.args.insert(launch.args.end(), spec.flags.begin(), spec.flags.end());
  const auto extra = split_args(options_.extra_args);
  launch.args.insert(launch.args.end(), extra.begin(), extra.end());
  return launch;
}

std::unique_ptr<ServerProcess> ScenarioEnv::start_server(const std::string& scenario, const ServerSpec& spec) {
  const int port = options_.port > 0 ? options_.port : pick_free_port();
  auto server = std::make_unique<ServerProcess>(launch(spec, port), port);
  note(scenario, "server: " + server->command_line());
  return server;
}

const CompletionResult& require_ok(const CompletionResult& result, const std::string& what) {
  if (!result.ok()) throw std::runtime_error(what + ": " + result.error);
  return result;
}

std::string sized_text(const BenchClient& client, std::uint64_t seed, int tokens) {
  // Words per token differ between tokenizers; measure and rescale a few times. make_text with a
  // given seed only appends as words grow, so the count rises with the word count.
  std::size_t words = static_cast<std::size_t>(std::max(1, tokens * 3 / 4));
  std::string text;
  for (int attempt = 0; attempt < 4; ++attempt) {
    text = make_text(seed, words);
    const auto counted = static_cast<double>(client.tokenize(text, false).size());
    const double off = std::abs(counted - tokens) / std::max(1, tokens);
    if (off <= 0.02 || counted == 0) break;
    words = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(words) * tokens / counted));
  }
  return text;
}

int context_for(std::int64_t cells) {
  const std::int64_t rounded = (std::max<std::int64_t>(cells, 4096) + 255) / 256 * 256;
  return static_cast<int>(rounded);
}

std::string cell(std::int64_t value) { return value < 0 ? "n/a" : std::to_string(value); }
std::string cell_ms(double ms) { return ms < 0 ? "n/a" : format_number(ms); }

}  // namespace prefixd::bench
