// prefixd bench — what the scenarios share: the server they start, their verdicts and helpers.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/client.h"
#include "bench/result.h"
#include "bench/server_process.h"

namespace prefixd::bench {

// A target from the spec and whether this run met it; `skip` when it could not be measured.
struct Check {
  enum class Verdict { pass, fail, skip };
  std::string name;
  Verdict verdict = Verdict::skip;
  std::string detail;  // the numbers behind the verdict
  nlohmann::json to_json() const;
};
Check make_check(std::string name, bool pass, std::string detail);
const char* verdict_name(Check::Verdict verdict);

struct ScenarioReport {
  nlohmann::json data = nlohmann::json::object();
  std::vector<Check> checks;
};

// How a scenario wants its server: `ctx_size` is the default that --ctx-size overrides.
struct ServerSpec {
  int parallel = 1;
  int ctx_size = 4096;
  std::vector<std::string> flags;
};

class ScenarioEnv {
 public:
  ScenarioEnv(const BenchOptions& options, std::string log_path, std::ostream& out, std::ostream& progress)
      : options_(options), log_path_(std::move(log_path)), out_(out), progress_(progress) {}

  const BenchOptions& options() const { return options_; }
  std::ostream& out() { return out_; }
  // "[name] message" on the progress stream, flushed: long runs should show they are alive.
  void note(const std::string& scenario, const std::string& message);

  int tokens_or(int fallback) const { return options_.tokens.value_or(fallback); }
  ServerLaunch launch(const ServerSpec& spec, int port) const;
  // Starts a fresh server (a fresh cache) for `scenario` and waits until it is healthy.
  std::unique_ptr<ServerProcess> start_server(const std::string& scenario, const ServerSpec& spec);
  BenchClient client(const ServerProcess& server) const { return BenchClient(server.port(), options_.request_timeout); }

 private:
  const BenchOptions& options_;
  std::string log_path_;
  std::ostream& out_;
  std::ostream& progress_;
};

// Throws with `what` and the server's error when the request failed: a scenario cannot be
// judged on requests that did not run.
const CompletionResult& require_ok(const CompletionResult& result, const std::string& what);

// Text of about `tokens` tokens as this server's tokenizer counts them (deterministic in `seed`).
std::string sized_text(const BenchClient& client, std::uint64_t seed, int tokens);

// ctx_size rounded up to a multiple of 256, at least 4096.
int context_for(std::int64_t cells);

// Cell text helpers: "n/a" for an unreported (-1) value.
std::string cell(std::int64_t value);
std::string cell_ms(double ms);

ScenarioReport run_resend(ScenarioEnv& env);
ScenarioReport run_grow(ScenarioEnv& env);
ScenarioReport run_shared(ScenarioEnv& env);
ScenarioReport run_thrash(ScenarioEnv& env);
ScenarioReport run_burst(ScenarioEnv& env);

}  // namespace prefixd::bench
