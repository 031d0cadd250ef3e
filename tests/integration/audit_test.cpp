// `prefixd-bench audit` against the real server: keys of two tenants (or two sessions under session
// isolation) are isolated, keys of one tenant (and a server without keys) share; prompts the
// server has seen before, a refused key, an unreachable server or a bad argument are errors with
// their own exit status, never a verdict.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Few trials of short prompts keep each audit to seconds on the tiny model. The shared verdicts
// rest on cached tokens; an isolated verdict would flip only if the timing test flagged two
// samples of one distribution: with 16 trials and alpha 0.001 it flags D >= 12/16, which two
// exchangeable samples (the probe order is drawn per trial) reach with probability 1.2e-4.
constexpr const char* kQuickAudit = " --trials 16 --prompt-tokens 300 --seed 11";

struct AuditRun {
  int status = -1;
  std::string out;  // stdout: the report
  std::string err;  // stderr: progress and errors
  json report;      // stdout parsed, when it is JSON
};

// Runs `prefixd-bench audit ARGS` to its end.
AuditRun run_audit(const std::string& args) {
  char err_template[] = "/tmp/prefixd-audit-test-XXXXXX";
  const int err_fd = ::mkstemp(err_template);
  AuditRun run;
  if (err_fd < 0) return run;
  ::close(err_fd);
  const std::string command = std::string(PREFIXD_BENCH_BINARY) + " audit " + args + " 2>" + err_template;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    std::array<char, 4096> buffer{};
    while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) run.out.append(buffer.data(), n);
    const int status = ::pclose(pipe);
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::ifstream err(err_template);
  run.err.assign(std::istreambuf_iterator<char>(err), {});
  ::unlink(err_template);
  run.report = json::parse(run.out, nullptr, false);
  return run;
}

std::string url_of(const ServerProcess& server) { return "--url http://127.0.0.1:" + std::to_string(server.port()); }

// A server with the key file `keys` (and `more_args`), removed with it.
class KeyedServer {
 public:
  explicit KeyedServer(const std::string& keys, std::vector<std::string> more_args = {})
      : path_(fs::temp_directory_path() / ("prefixd-audit-keys-" + std::to_string(::getpid()) + "-" +
                                           std::to_string(counter_++))) {
    std::ofstream(path_, std::ios::trunc) << keys;
    more_args.insert(more_args.begin(), {"--api-keys", path_.string()});
    server_ = std::make_unique<ServerProcess>(ServerConfig{.extra_args = std::move(more_args)});
  }
  ~KeyedServer() {
    server_.reset();
    fs::remove(path_);
  }
  const ServerProcess& server() const { return *server_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
  std::unique_ptr<ServerProcess> server_;
};

// The report's facts every verdict rests on: the trials ran, prompts had the asked length, every
// probe said how many tokens it reused, and the timing test was computed on all of them.
void expect_complete(const AuditRun& run) {
  ASSERT_EQ(run.status, 0) << run.err;
  ASSERT_TRUE(run.report.is_object()) << run.out;
  EXPECT_EQ(run.report["trials"], 16);
  EXPECT_EQ(run.report["trial_list"].size(), 16u);
  EXPECT_TRUE(run.report["cached_tokens"]["reported"].get<bool>());
  EXPECT_EQ(run.report["ks"]["n"], 16);
  EXPECT_EQ(run.report["ks"]["m"], 16);
  const double primed_tokens = run.report["trial_list"][0]["primed"]["prompt_tokens"].get<double>();
  EXPECT_GT(primed_tokens, 300 * 0.8) << "the measured words per token size the prompts";
  EXPECT_LT(primed_tokens, 300 * 1.25);
  // Both orders occur, so neither probe is always the one that runs first.
  int primed_first = 0;
  for (const json& trial : run.report["trial_list"]) primed_first += trial["primed_first"].get<bool>() ? 1 : 0;
  EXPECT_GT(primed_first, 0);
  EXPECT_LT(primed_first, 16);
}

// The JSON report of auditing the key file's `audit-key-a` against its `audit-key-b`.
AuditRun audit_both_keys(const KeyedServer& keyed) {
  return run_audit(url_of(keyed.server()) + " --key-a audit-key-a --key-b audit-key-b --json" + kQuickAudit);
}

void expect_isolated(const AuditRun& run) {
  EXPECT_EQ(run.report["verdict"], "isolated") << run.out << run.err;
  EXPECT_EQ(run.report["cached_tokens"]["trials_primed_reused"], 0);
}

TEST(Audit, KeysOfTwoTenantsAreIsolated) {
  KeyedServer keyed("audit-key-a alpha\naudit-key-b beta\n");
  const AuditRun run = audit_both_keys(keyed);
  expect_complete(run);
  expect_isolated(run);
  EXPECT_FALSE(run.report["by_cached_tokens"].get<bool>());
  EXPECT_FALSE(run.report["by_timing"].get<bool>()) << "p = " << run.report["ks"]["p_value"];
  // Key B's copy of key A's prompt was computed from scratch, like the fresh one.
  for (const json& trial : run.report["trial_list"]) {
    EXPECT_EQ(trial["primed"]["cached_tokens"], trial["miss"]["cached_tokens"]) << trial.dump();
    EXPECT_EQ(trial["primed"]["outcome"], "cold") << trial.dump();
  }
}

TEST(Audit, KeysOfTwoTenantsAreIsolatedWhenEveryProbeReusesTheTemplatesOpening) {
  // With no shortest reusable prefix, each key reuses its own earlier prompts' opening tokens (the
  // template's, and now and then a first word or two of the random text): every probe reports
  // cached tokens, and only what goes well beyond the fresh prompt's counts as reuse.
  KeyedServer keyed("audit-key-a alpha\naudit-key-b beta\n", {"--prompt-cache-min-prefix", "1"});
  const AuditRun run = audit_both_keys(keyed);
  expect_complete(run);
  expect_isolated(run);
  for (const json& trial : run.report["trial_list"]) {
    EXPECT_GT(trial["miss"]["cached_tokens"].get<int>(), 0) << trial.dump();
    EXPECT_LT(trial["primed"]["cached_tokens"].get<int>(), 300 / 4) << trial.dump();
  }
}

TEST(Audit, SessionsOfOneTenantAreIsolatedUnderSessionIsolation) {
  // Each key sends its own session (`user`), which --cache-isolation session walls off.
  KeyedServer keyed("audit-key-a alpha\naudit-key-b alpha\n", {"--cache-isolation", "session"});
  const AuditRun run = audit_both_keys(keyed);
  expect_complete(run);
  expect_isolated(run);
}

TEST(Audit, KeysOfOneTenantShare) {
  KeyedServer keyed("audit-key-a alpha\naudit-key-b alpha\n");
  const AuditRun run = audit_both_keys(keyed);
  expect_complete(run);
  EXPECT_EQ(run.report["verdict"], "shared") << run.out << run.err;
  EXPECT_TRUE(run.report["by_cached_tokens"].get<bool>());
  EXPECT_EQ(run.report["cached_tokens"]["trials_primed_reused"], 16);
  for (const json& trial : run.report["trial_list"]) {
    // All of A's prompt but the token every request computes itself.
    EXPECT_EQ(trial["primed"]["cached_tokens"].get<int>(), trial["primed"]["prompt_tokens"].get<int>() - 1) << trial.dump();
    EXPECT_EQ(trial["miss"]["outcome"], "cold") << trial.dump();
  }
  EXPECT_TRUE(run.report["ks"]["d"].is_number());
  EXPECT_TRUE(run.report["ks"]["p_value"].is_number());
}

TEST(Audit, AServerWithoutKeysSharesAndTheSameSeedTwiceIsRefused) {
  ServerProcess server;
  const AuditRun run = run_audit(url_of(server) + kQuickAudit);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("verdict: shared"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("in 16 of 16 trials"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Kolmogorov–Smirnov D = "), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("trial 16/16"), std::string::npos) << run.err;
  // The same seed again sends prompts the server has cached: not fresh, so no verdict.
  const AuditRun again = run_audit(url_of(server) + kQuickAudit);
  EXPECT_EQ(again.status, 1) << again.out;
  EXPECT_NE(again.err.find("trial 1: key A's first request of the trial's prompt already reported cached"), std::string::npos) << again.err;
  EXPECT_EQ(again.out.find("verdict"), std::string::npos) << again.out;
}

TEST(Audit, ARefusedKeyIsAnErrorNotAVerdict) {
  KeyedServer keyed("audit-key-a alpha\n");
  const AuditRun wrong = run_audit(url_of(keyed.server()) + " --key-a audit-key-a --key-b not-a-key" + kQuickAudit);
  EXPECT_EQ(wrong.status, 3) << wrong.out << wrong.err;
  EXPECT_NE(wrong.err.find("key B was refused"), std::string::npos) << wrong.err;
  EXPECT_NE(wrong.err.find("401"), std::string::npos) << wrong.err;
  EXPECT_EQ(wrong.out.find("verdict"), std::string::npos) << wrong.out;
  const AuditRun none = run_audit(url_of(keyed.server()) + " --key-b audit-key-a" + kQuickAudit);
  EXPECT_EQ(none.status, 3) << none.err;
  EXPECT_NE(none.err.find("key A was refused"), std::string::npos) << none.err;
}

TEST(Audit, AnUnreachableServerIsAnError) {
  const AuditRun run = run_audit("--url http://127.0.0.1:" + std::to_string(pick_free_port()) + kQuickAudit);
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_NE(run.err.find("cannot reach http://127.0.0.1:"), std::string::npos) << run.err;
}

TEST(Audit, BadArgumentsAreRefusedBeforeAnyRequest) {
  const AuditRun https = run_audit("--url https://127.0.0.1:1" + std::string(kQuickAudit));
  EXPECT_EQ(https.status, 1);
  EXPECT_NE(https.err.find("prefixd-bench audit: error: --url 'https://127.0.0.1:1' is not http://HOST:PORT"), std::string::npos)
      << https.err;
  EXPECT_NE(run_audit("--url http://127.0.0.1:1 --trials 1").status, 0);
  EXPECT_NE(run_audit("--url http://127.0.0.1:1 --alpha 2").status, 0);
  EXPECT_NE(run_audit("--trials 4").status, 0) << "--url is required";
}

}  // namespace
}  // namespace prefixd::testing
