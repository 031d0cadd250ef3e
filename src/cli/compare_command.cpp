// `prefixd compare`: options in, compare::run_compare out. The harness lives in src/compare.
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "compare/compare.h"
#include "compare/workload.h"

namespace prefixd::cli {
namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty() && item != "all") out.push_back(item);
  }
  return out;
}

}  // namespace

std::function<int()> add_compare_command(CLI::App& app) {
  auto o = std::make_shared<compare::CompareOptions>();
  auto workloads = std::make_shared<std::string>("all");
  auto targets = std::make_shared<std::string>("prefixd,llama-server");
  auto startup_s = std::make_shared<int>(600);
  auto request_s = std::make_shared<int>(3600);
  CLI::App* cmd = app.add_subcommand(
      "compare", "Benchmark prefixd against llama-server on the same model and workloads (docs/benchmarks.md)");
  std::string names;
  for (const auto& n : compare::workload_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("-m,--model", o->model_path, "GGUF model both servers load")->check(CLI::ExistingFile);
  cmd->add_option("--workloads", *workloads, "Comma-separated workloads, or all: " + names)->capture_default_str();
  cmd->add_option("--targets", *targets, "Servers to run: prefixd, llama-server, or both")->capture_default_str();
  cmd->add_option("--scale", o->scale, "BENCH_SCALE: multiplies every token length (4 gives the issue's 1k–8k sizes)")
      ->capture_default_str()->check(CLI::Range(0.01, 1000.0));
  cmd->add_option("--seed", o->seed, "Workload seed (the same seed sends the same bytes)")->capture_default_str();
  cmd->add_option("--reps", o->reps, "Repetitions of a probe arm; agent runs; edited conversations")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--cold-reps-long", o->cold_reps_long, "Repetitions of the two longest cold resend arms")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("-t,--threads", o->threads, "Threads of both servers (0: every CPU)")->capture_default_str()->check(CLI::Range(0, 1024));
  cmd->add_option("--cache-mib", o->cache_mib,
                  "Host prompt-cache budget of both servers, MiB: llama-server --cache-ram, prefixd "
                  "--prompt-cache-capacity-bytes")
      ->capture_default_str()->check(CLI::Range(1, 1 << 22));
  cmd->add_option("--out", o->out_dir, "Folder for <name>.json, <name>.md and the plots")->capture_default_str();
  cmd->add_option("--name", o->name, "File stem (default <UTC date>-<hostname>)");
  cmd->add_option("--prefixd-bin", o->prefixd_bin, "prefixd binary to start (default: this one)")->check(CLI::ExistingFile);
  cmd->add_option("--llama-server", o->llama_server_bin, "llama-server binary (a path, or a name looked up on PATH)")
      ->capture_default_str();
  cmd->add_option("--prefixd-args", o->prefixd_args, "More `prefixd serve` arguments");
  cmd->add_option("--llama-args", o->llama_args, "More llama-server arguments, e.g. \"--cache-reuse 256\"");
  cmd->add_option("--docs", o->docs_path, "Also write the report between the markers of this Markdown page");
  cmd->add_option("--render", o->render_path, "Only re-render the report, plots and docs of this results file")
      ->check(CLI::ExistingFile);
  cmd->add_option("--server-log", o->server_log, "Append both servers' output here (default: a temporary file, kept on error)");
  cmd->add_flag("!--no-gates", o->gates, "Skip the correctness gates");
  cmd->add_flag("!--no-plots", o->plots, "Do not run gnuplot");
  cmd->add_option("--startup-timeout", *startup_s, "Seconds to wait for a server's /health")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  cmd->add_option("--request-timeout", *request_s, "Seconds one request may take")->capture_default_str()->check(CLI::Range(1, 86400));
  return [o, workloads, targets, startup_s, request_s]() {
    if (o->render_path.empty() && o->model_path.empty()) throw std::invalid_argument("--model is required (or --render FILE)");
    o->workloads = split_list(*workloads);
    o->targets = split_list(*targets);
    o->startup_timeout = std::chrono::seconds(*startup_s);
    o->request_timeout = std::chrono::seconds(*request_s);
    return compare::run_compare(*o, std::cout, std::cerr);
  };
}

}  // namespace prefixd::cli
