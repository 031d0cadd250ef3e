// run_bench: runs the chosen scenarios one after another (each with its own fresh server), prints
// their tables and verdicts, and writes the JSON report.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <format>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "bench/server_log.h"
#include "bench/bench.h"
#include "bench/scenario.h"

namespace prefixd::bench {
namespace {

using ScenarioFn = ScenarioReport (*)(ScenarioEnv&);

ScenarioFn scenario_function(const std::string& name) {
  if (name == "resend") return run_resend;
  if (name == "grow") return run_grow;
  if (name == "shared") return run_shared;
  if (name == "thrash") return run_thrash;
  if (name == "burst") return run_burst;
  throw std::invalid_argument("unknown scenario '" + name + "'");
}

std::string utc_now() {
  return std::format("{:%Y-%m-%dT%H:%M:%SZ}", std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
}


// Timings are only as good as the machine is idle: say how busy it was when the run began.
nlohmann::json host_json() {
  double load = -1;
  std::ifstream("/proc/loadavg") >> load;
  return {{"cpus", std::thread::hardware_concurrency()}, {"load_average_1m", load}};
}

nlohmann::json options_json(const BenchOptions& o) {
  return {{"scenario", o.scenario},
          {"model", o.model_path},
          {"tokens", o.tokens ? nlohmann::json(*o.tokens) : nlohmann::json()},
          {"reps", o.reps.value_or(5)},
          {"cold_reps", o.cold_reps},
          {"sessions", o.sessions},
          {"threads", o.threads ? nlohmann::json(*o.threads) : nlohmann::json()},
          {"ctx_size", o.ctx_size ? nlohmann::json(*o.ctx_size) : nlohmann::json()},
          {"extra_args", o.extra_args}};
}

}  // namespace

const std::vector<std::string>& scenario_names() {
  static const std::vector<std::string> kNames = {"resend", "grow", "shared", "thrash", "burst"};
  return kNames;
}

int run_bench(const BenchOptions& options, std::ostream& out, std::ostream& progress) {
  std::vector<std::string> chosen;
  if (options.scenario == "all") {
    chosen = scenario_names();
  } else {
    scenario_function(options.scenario);  // rejects an unknown name before any server starts
    chosen = {options.scenario};
  }
  const std::string started_at = utc_now();
  const nlohmann::json host = host_json();
  out << std::format("# prefixd bench: {} ({} CPUs, load average {:.2f} at start)\n", options.model_path,
                     host["cpus"].get<unsigned>(), host["load_average_1m"].get<double>());
  if (host["load_average_1m"].get<double>() >= 1.0) {
    out << "note: the machine is busy; timings will be noisy (fed/cached token counts are not affected).\n";
  }
  bench::ServerLog log(options.server_log, "prefixd-bench-server");
  ScenarioEnv env(options, log.path(), out, progress);
  nlohmann::json results = nlohmann::json::array();
  int errors = 0;
  std::vector<std::string> verdicts;
  for (const auto& name : chosen) {
    out << "\n## " << name << "\n\n";
    nlohmann::json entry = {{"name", name}};
    const auto t0 = std::chrono::steady_clock::now();
    try {
      ScenarioReport report = scenario_function(name)(env);
      out << "\n";
      nlohmann::json checks = nlohmann::json::array();
      for (const auto& check : report.checks) {
        const std::string line = std::format("{} {}: {} — {}", verdict_name(check.verdict), name, check.name, check.detail);
        out << line << "\n";
        verdicts.push_back(line);
        checks.push_back(check.to_json());
      }
      entry["ok"] = true;
      entry["checks"] = checks;
      entry["result"] = std::move(report.data);
    } catch (const std::exception& e) {
      ++errors;
      log.keep();
      const std::string line = std::format("ERROR {}: {}", name, e.what());
      out << line << "\n";
      verdicts.push_back(line.substr(0, line.find('\n')));
      entry["ok"] = false;
      entry["error"] = e.what();
    }
    entry["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.flush();
    results.push_back(std::move(entry));
  }
  if (chosen.size() > 1) {
    out << "\n## summary\n\n";
    for (const auto& v : verdicts) out << v << "\n";
  }
  if (errors > 0) out << "\nserver log: " << log.path() << "\n";
  if (!options.json_path.empty()) {
    const nlohmann::json doc = {{"prefixd_bench", 1},
                                {"started_at", started_at},
                                {"options", options_json(options)},
                                {"host", host},
                                {"scenarios", results}};
    std::ofstream file(options.json_path);
    file << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!file) throw std::runtime_error("cannot write " + options.json_path);
    progress << "[bench] wrote " << options.json_path << std::endl;
  }
  return errors == 0 ? 0 : 1;
}

}  // namespace prefixd::bench
