// run_compare: calibrates the text sizes, runs every workload on each server in turn, and writes
// the results file, the report, the plots and the docs page.
#include <unistd.h>

#include <filesystem>
#include <format>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "bench/server_log.h"
#include "bench/prompts.h"
#include "compare/compare.h"
#include "compare/executor.h"
#include "compare/gates.h"
#include "compare/machine.h"
#include "compare/plots.h"
#include "compare/report.h"
#include "compare/stats.h"
#include "compare/target.h"
#include "compare/workload.h"

namespace prefixd::compare {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;


std::vector<Target> make_targets(const CompareOptions& o) {
  std::vector<Target> targets;
  for (const auto& name : o.targets) {
    if (name == "prefixd") {
      std::error_code error;
      const auto self = fs::read_symlink("/proc/self/exe", error);
      const std::string bin = !o.prefixd_bin.empty() ? o.prefixd_bin : error ? "/proc/self/exe" : self.string();
      targets.emplace_back(TargetKind::prefixd, bin, bench::split_args(o.prefixd_args));
    } else if (name == "llama-server") {
      const std::string bin = find_executable(o.llama_server_bin);
      if (bin.empty()) throw std::runtime_error("llama-server not found ('" + o.llama_server_bin + "'); install llama.cpp-tools or pass --llama-server PATH");
      targets.emplace_back(TargetKind::llama_server, bin, bench::split_args(o.llama_args));
    } else {
      throw std::invalid_argument("unknown target '" + name + "' (prefixd, llama-server)");
    }
  }
  if (targets.empty()) throw std::invalid_argument("no target to run");
  return targets;
}

nlohmann::json workload_json(const Workload& w) {
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& a : w.arms) arms.push_back({{"name", a.name}, {"cold", a.cold}, {"pinned", a.pinned}});
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : w.steps) {
    steps.push_back({{"arm", s.arm}, {"session", s.session}, {"max_tokens", s.max_tokens},
                     {"planned_tokens", s.planned_tokens}, {"x", s.x}, {"restart_before", s.restart_before}});
  }
  return {{"name", w.name},         {"title", w.title},     {"description", w.description}, {"parallel", w.parallel},
          {"concurrency", w.concurrency}, {"ctx_size", w.ctx_size}, {"x_label", w.x_label},   {"gate_step", w.gate_index()},
          {"arms", arms},           {"steps", steps},       {"targets", nlohmann::json::object()},
          {"order", nlohmann::json::array()}};
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

void write_results(const fs::path& path, const nlohmann::json& results) {
  write_text(path, results.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

// Plots, report and docs page from a finished (or re-read) results file. Returns false when
// some server failed or some gate did not pass.
bool publish(nlohmann::json& results, const fs::path& dir, const std::string& stem, const CompareOptions& o,
             std::ostream& out, std::ostream& progress) {
  if (o.plots) {
    std::string why;
    results["plots"] = make_plots(results, dir.string(), stem, why);
    if (!why.empty()) progress << "[plots] " << why << std::endl;
  }
  const fs::path json_path = dir / (stem + ".json");
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
    write_text(docs, splice_report(page, report));
    progress << "[compare] updated " << docs.string() << std::endl;
  }
  out << "\n" << render_summary(results);
  bool ok = true;
  for (const auto& w : list_at(results, "workloads")) {
    if (!w.contains("targets")) continue;
    for (const auto& [name, record] : w.at("targets").items()) {
      if (record.contains("error") || (record.contains("gates") && !gates_passed(record.at("gates")))) ok = false;
    }
  }
  return ok;
}

}  // namespace

int run_compare(const CompareOptions& o, std::ostream& out, std::ostream& progress) {
  if (!o.render_path.empty()) {
    const fs::path path = o.render_path;
    nlohmann::json results = nlohmann::json::parse(read_text(path));
    return publish(results, path.has_parent_path() ? path.parent_path() : fs::path("."), path.stem().string(), o, out,
                   progress)
               ? 0
               : 1;
  }
  const std::vector<std::string> names = o.workloads.empty() ? workload_names() : o.workloads;
  const WorkloadParams probe{.seed = o.seed, .scale = o.scale, .reps = o.reps, .cold_reps_long = o.cold_reps_long};
  for (const auto& name : names) make_workload(name, probe);  // rejects an unknown name before any server starts
  const std::vector<Target> targets = make_targets(o);

  const auto t0 = Clock::now();
  const fs::path dir = o.out_dir;
  fs::create_directories(dir);
  const nlohmann::json machine = machine_json();
  const std::string stem = !o.name.empty() ? o.name : utc_date() + "-" + file_safe(machine.value("hostname", "host"));
  bench::ServerLog log(o.server_log, "prefixd-compare-servers");
  RunConfig config;
  config.base.model_path = o.model_path;
  config.base.threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  config.base.cache_mib = o.cache_mib;
  config.log_path = log.path();
  config.startup_limit = o.startup_timeout;
  config.request_timeout = o.request_timeout;
  config.gates = o.gates;
  if (machine.value("load_average_1m", 0.0) >= 1.0) {
    progress << std::format("[compare] note: load average {:.2f} at start; timings will be noisy (token counts are not)\n",
                            machine.value("load_average_1m", 0.0));
  }

  WorkloadParams params = probe;
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
                              {"threads", config.base.threads},
                              {"cache_mib", o.cache_mib},
                              {"words_per_token", params.words_per_token}}},
                            {"servers", nlohmann::json::array()},
                            {"workloads", nlohmann::json::array()}};
  for (const auto& t : targets) {
    results["servers"].push_back({{"name", t.name()},
                                  {"binary", t.binary()},
                                  {"version", t.version()},
                                  {"context_note", t.context_note()},
                                  {"extra_args", t.kind() == TargetKind::prefixd ? o.prefixd_args : o.llama_args}});
  }
  const fs::path json_path = dir / (stem + ".json");
  for (std::size_t i = 0; i < names.size(); ++i) {
    const Workload w = make_workload(names[i], params);
    nlohmann::json entry = workload_json(w);
    progress << std::format("[compare] {} ({} requests, ctx {}, --parallel {})", w.name, w.steps.size(), w.ctx_size,
                            w.parallel)
             << std::endl;
    // Alternate which server goes first, so a drift in the machine's speed does not always favour
    // the same one.
    std::vector<const Target*> order;
    for (const auto& t : targets) order.push_back(&t);
    if (i % 2 == 1) std::ranges::reverse(order);
    for (const Target* t : order) {
      entry["order"].push_back(t->name());
      entry["targets"][t->name()] = run_workload(*t, w, config, progress);
      if (entry["targets"][t->name()].contains("error")) log.keep();
    }
    results["workloads"].push_back(std::move(entry));
    results["seconds"] = std::chrono::duration<double>(Clock::now() - t0).count();
    write_results(json_path, results);  // a crash later keeps what ran
  }
  const bool ok = publish(results, dir, stem, o, out, progress);
  if (!ok) {
    log.keep();
    out << "\nsome server failed or some gate did not pass; server log: " << log.path() << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace prefixd::compare
