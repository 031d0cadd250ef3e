// run_compare and run_bench: calibrate the text sizes, run every workload on each target in turn
// (interleaved when asked), then publish: the results file, report, plots and docs page for
// compare; the report and the checks' verdicts on stdout for bench.
#include <unistd.h>

#include <filesystem>
#include <format>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "bench/server_log.h"
#include "bench/prompts.h"
#include "bench/bench.h"
#include "bench/checks.h"
#include "bench/executor.h"
#include "bench/gates.h"
#include "bench/machine.h"
#include "bench/plots.h"
#include "bench/report.h"
#include "bench/report_stats.h"
#include "bench/report_tokens.h"
#include "bench/results_file.h"
#include "bench/target.h"
#include "bench/workload.h"

namespace prefixd::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;


nlohmann::json workload_json(const Workload& w) {
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& a : w.arms) arms.push_back({{"name", a.name}, {"cold", a.cold}, {"pinned", a.pinned}});
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : w.steps) {
    steps.push_back({{"arm", s.arm}, {"session", s.session}, {"max_tokens", s.max_tokens},
                     {"planned_tokens", s.planned_tokens}, {"x", s.x}, {"restart_before", s.restart_before}});
    if (s.arrival_s >= 0) steps.back()["arrival_s"] = s.arrival_s;
    if (s.started >= 0) {
      steps.back()["started"] = s.started;
      steps.back()["start_delay_s"] = s.start_delay_s;
    }
  }
  nlohmann::json entry = {{"name", w.name},         {"title", w.title},     {"description", w.description}, {"parallel", w.parallel},
          {"concurrency", w.concurrency}, {"ctx_size", w.ctx_size}, {"x_label", w.x_label},   {"gate_step", w.gate_index()},
          {"throughput", w.throughput}, {"disk_tier", w.disk_tier}, {"latency", w.latency}, {"clients", w.clients},
          {"arms", arms},           {"steps", steps},       {"targets", nlohmann::json::object()},
          {"order", nlohmann::json::array()}};
  if (w.llama_ctx_size > 0) entry["llama_ctx_size"] = w.llama_ctx_size;
  return entry;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  if (!file) throw std::runtime_error("cannot write " + path.string());
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// False when some server failed, or some gate or check did not pass.
bool all_passed(const nlohmann::json& results) {
  if (!token_gate_passed(results)) return false;
  for (const auto& w : list_at(results, "workloads")) {
    if (!w.contains("targets")) continue;
    for (const auto& [name, record] : w.at("targets").items()) {
      if (record.contains("error")) return false;
      if (record.contains("gates") && !gates_passed(record.at("gates"))) return false;
      if (record.contains("checks") && !checks_passed(record.at("checks"))) return false;
    }
  }
  return true;
}

// Every workload on every target: interleaved repetitions alternate the target order (A B, then
// B A, …) and so does each workload's first repetition, so a drift in the machine's speed does
// not always favour the same target. With `checks`, each record gets its workload's checks.
// `partial` (if not empty) is rewritten after each workload, so a crash keeps what ran.
nlohmann::json run_all(const RunOptions& o, const std::vector<Target>& targets, const std::vector<std::string>& names,
                       bool checks, const fs::path& partial, ServerLog& log, std::ostream& progress) {
  const auto t0 = Clock::now();
  const nlohmann::json machine = machine_json();
  RunConfig config;
  config.base.model_path = o.model_path;
  config.base.threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  config.base.cache_mib = o.cache_mib;
  config.base.snapshot_mib = o.snapshot_mib;
  config.log_path = log.path();
  config.startup_limit = o.startup_timeout;
  config.request_timeout = o.request_timeout;
  config.disk_parent = o.disk_dir;
  if (machine.value("load_average_1m", 0.0) >= 1.0) {
    progress << std::format("[bench] note: load average {:.2f} at start; timings will be noisy (token counts are not)\n",
                            machine.value("load_average_1m", 0.0));
  }
  WorkloadParams params{.seed = o.seed, .scale = o.scale, .reps = o.reps, .cold_reps_long = o.cold_reps_long};
  params.words_per_token = measure_words_per_token(targets.front(), config, progress);

  nlohmann::json results = {{"prefixd_compare", 1},
                            {"started_at", utc_timestamp()},
                            {"date", utc_date()},
                            {"machine", machine},
                            {"options",
                             {{"model", o.model_path},
                              {"scale", o.scale},
                              {"seed", o.seed},
                              {"reps", o.reps},
                              {"cold_reps_long", o.cold_reps_long},
                              {"interleave", o.interleave},
                              {"threads", config.base.threads},
                              {"cache_mib", o.cache_mib},
                              {"snapshot_mib", o.snapshot_mib},
                              {"token_gate", o.token_gate},
                              {"disk_dir", o.disk_dir},
                              {"words_per_token", params.words_per_token}}},
                            {"servers", nlohmann::json::array()},
                            {"workloads", nlohmann::json::array()}};
  for (const auto& t : targets) {
    std::string extra;
    for (const auto& a : t.extra_args()) extra += (extra.empty() ? "" : " ") + a;
    results["servers"].push_back({{"name", t.name()},
                                  {"kind", t.kind_name()},
                                  {"binary", t.binary()},
                                  {"version", t.version()},
                                  {"context_note", t.context_note()},
                                  {"extra_args", extra},
                                  // --token-gate judges prefixd's default configuration only.
                                  {"token_gated", t.name() == "prefixd"}});
  }
  const int reps = std::max(1, o.interleave);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const Workload w = make_workload(names[i], params);
    nlohmann::json entry = workload_json(w);
    progress << std::format("[bench] {} ({} requests, ctx {}, --parallel {}, {} run(s) per target)", w.name, w.steps.size(),
                            w.ctx_size, w.parallel, reps)
             << std::endl;
    for (int rep = 0; rep < reps; ++rep) {
      std::vector<const Target*> order;
      for (const auto& t : targets) order.push_back(&t);
      if ((i + static_cast<std::size_t>(rep)) % 2 == 1) std::ranges::reverse(order);
      nlohmann::json rep_order = nlohmann::json::array();
      for (const Target* t : order) {
        // The gates replay one request; once per target is enough.
        config.gates = o.gates && rep == 0;
        entry["order"].push_back(t->name());
        rep_order.push_back(t->name());
        nlohmann::json record = run_workload(*t, w, config, progress);
        if (record.contains("error")) log.keep();
        merge_repetition(entry["targets"][t->name()], std::move(record), rep);
      }
      entry["reps"].push_back({{"order", rep_order}});
    }
    if (checks || w.compare_checks) {
      for (auto& [name, record] : entry["targets"].items()) {
        nlohmann::json verdicts = nlohmann::json::array();
        for (const auto& c : workload_checks(entry, record)) verdicts.push_back(c.to_json());
        if (!verdicts.empty()) record["checks"] = std::move(verdicts);
      }
    }
    results["workloads"].push_back(std::move(entry));
    results["seconds"] = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!partial.empty()) write_results(partial, results);
  }
  return results;
}

// Rejects unknown workload and target names before any server starts.
std::vector<Target> prepare(const RunOptions& o, const std::vector<std::string>& names,
                            const std::vector<std::string>& target_list) {
  const WorkloadParams probe{.seed = o.seed, .scale = o.scale, .reps = o.reps, .cold_reps_long = o.cold_reps_long};
  for (const auto& name : names) make_workload(name, probe);
  if (o.snapshot_mib >= o.cache_mib) throw std::invalid_argument("--snapshot-mib must be below --cache-mib");
  std::vector<Target> targets;
  for (const auto& name : target_list) targets.push_back(make_target(name, o.sources));
  if (targets.empty()) throw std::invalid_argument("no target to run");
  return targets;
}

// Plots, report and docs page from a finished (or re-read) results file. Returns false when
// some server failed or some gate did not pass.
bool publish(nlohmann::json& results, const fs::path& dir, const std::string& stem, const RunOptions& options,
             std::ostream& out, std::ostream& progress) {
  const RunOptions& o = options;
  if (o.plots) {
    std::string why;
    results["plots"] = make_plots(results, dir.string(), stem, why);
    if (!why.empty()) progress << "[plots] " << why << std::endl;
  }
  const fs::path json_path = dir / results_file_name(stem);
  write_results(json_path, results);
  const fs::path md_path = dir / (stem + ".md");
  write_text(md_path, render_report(results, {.image_prefix = "", .heading_level = 1}));
  progress << "[compare] wrote " << json_path.string() << " and " << md_path.string() << std::endl;
  if (!o.docs_path.empty()) {
    const fs::path docs = o.docs_path;
    const fs::path from = docs.has_parent_path() ? fs::absolute(docs.parent_path()) : fs::current_path();
    std::string prefix = fs::relative(fs::absolute(dir), from).generic_string();
    prefix = prefix.empty() || prefix == "." ? "" : prefix + "/";
    const std::string report = render_report(results, {.image_prefix = prefix, .heading_level = 2});
    const std::string page = fs::exists(docs) ? read_text(docs) : "# Benchmarks\n";
    write_text(docs, splice_report(page, report, o.docs_section));
    progress << "[compare] updated " << docs.string() << std::endl;
  }
  out << "\n" << render_summary(results);
  if (!token_gate_passed(results)) out << "\ntoken gate: FAIL (prefixd evaluated more prompt tokens than llama-server somewhere)\n";
  if (const std::string interleaved = render_interleaved(results); !interleaved.empty()) out << "\n" << interleaved;
  for (const auto& w : list_at(results, "workloads")) {
    for (const auto& [target, record] : w.value("targets", nlohmann::json::object()).items()) {
      for (const auto& c : list_at(record, "checks")) {
        out << std::format("{} {} / {}: {} — {}\n", c.value("verdict", "?"), w.value("name", ""), target, c.value("name", ""),
                           c.value("detail", ""));
      }
    }
  }
  return all_passed(results);
}

}  // namespace

int run_compare(const RunOptions& o, std::ostream& out, std::ostream& progress) {
  if (!o.render_path.empty()) {
    const fs::path path = o.render_path;
    nlohmann::json results = read_results(path);
    return publish(results, path.has_parent_path() ? path.parent_path() : fs::path("."), results_stem(path), o, out,
                   progress)
               ? 0
               : 1;
  }
  const std::vector<std::string> names = expand_workload_names(o.workloads.empty() ? compare_workload_names() : o.workloads);
  const std::vector<Target> targets = prepare(o, names, o.targets);
  const fs::path dir = o.out_dir;
  fs::create_directories(dir);
  const std::string stem = !o.name.empty() ? o.name : utc_date() + "-" + file_safe(machine_json().value("hostname", "host"));
  ServerLog log(o.server_log, "prefixd-compare-servers");
  nlohmann::json results = run_all(o, targets, names, /*checks=*/false, dir / results_file_name(stem), log, progress);
  const bool ok = publish(results, dir, stem, o, out, progress);
  if (!ok) {
    log.keep();
    out << "\nsome server failed or some gate did not pass; server log: " << log.path() << "\n";
  }
  return ok ? 0 : 1;
}

int run_bench(const RunOptions& o, std::ostream& out, std::ostream& progress) {
  const std::vector<std::string> names = expand_workload_names(o.workloads.empty() ? bench_workload_names() : o.workloads);
  const std::vector<Target> targets = prepare(o, names, {"prefixd"});
  ServerLog log(o.server_log, "prefixd-bench-server");
  RunOptions once = o;
  once.interleave = 1;  // the checks judge one run per workload
  const nlohmann::json results = run_all(once, targets, names, /*checks=*/true, o.json_path, log, progress);
  out << render_report(results, {.image_prefix = "", .heading_level = 1});
  out << "## Verdicts\n\n";
  for (const auto& w : list_at(results, "workloads")) {
    for (const auto& [target, record] : w.at("targets").items()) {
      if (record.contains("error")) out << std::format("ERROR {}: {}\n", w.value("name", ""), record.value("error", ""));
      if (record.contains("gates")) {
        out << std::format("{} {}: correctness gates\n", gates_passed(record.at("gates")) ? "PASS" : "FAIL", w.value("name", ""));
      }
      for (const auto& c : list_at(record, "checks")) {
        out << std::format("{} {}: {} — {}\n", c.value("verdict", "?"), w.value("name", ""), c.value("name", ""),
                           c.value("detail", ""));
      }
    }
  }
  if (!o.json_path.empty()) progress << "[bench] wrote " << o.json_path << std::endl;
  const bool ok = all_passed(results);
  if (!ok) {
    log.keep();
    out << "\nserver log: " << log.path() << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace prefixd::bench
