// `prefixd-bench bench` and `prefixd-bench compare`: options in, bench::run_bench /
// bench::run_compare out. Both drive the same benchmark component (src/bench); they differ in
// targets, defaults and what they write.
#include <algorithm>
#include <cctype>
#include <iostream>
#include <memory>
#include <sstream>

#include "bench/bench.h"
#include "bench/target.h"
#include "bench/workload.h"
#include "bench_cli/commands.h"

namespace prefixd::bench_cli {
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

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// What the options parse into before the run starts.
struct Parsed {
  bench::RunOptions run;
  std::string workloads;
  std::string targets = "prefixd,llama-server";
  std::vector<std::string> variants;  // NAME=ARGS
  int startup_s = 600;
  int request_s = 3600;

  // `all` and the empty list mean the command's default workloads.
  bench::RunOptions finish() {
    run.workloads = split_list(workloads);
    run.targets = split_list(targets);
    for (const auto& spec : variants) run.sources.variants.insert(bench::parse_variant(spec));
    run.startup_timeout = std::chrono::seconds(startup_s);
    run.request_timeout = std::chrono::seconds(request_s);
    return run;
  }
};

// The options both commands share.
void add_common_options(CLI::App* cmd, Parsed& p, const std::string& default_workloads) {
  bench::RunOptions& o = p.run;
  cmd->add_option("-m,--model", o.model_path, "GGUF model the servers load")->check(CLI::ExistingFile);
  cmd->add_option("--workloads", p.workloads,
                  "Comma-separated workloads; all or none: " + default_workloads + ". Known: " +
                      joined(bench::workload_names()));
  cmd->add_option("--scale", o.scale, "BENCH_SCALE: multiplies every token length (4 gives the full sizes)")
      ->capture_default_str()->check(CLI::Range(0.01, 1000.0));
  cmd->add_option("--seed", o.seed, "Workload seed (the same seed sends the same bytes)")->capture_default_str();
  cmd->add_option("--reps", o.reps, "Repetitions of a probe arm; agent runs; edited conversations")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--cold-reps-long", o.cold_reps_long, "Repetitions of the two longest cold resend arms")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("-t,--threads", o.threads, "Threads of every server (0: every CPU)")->capture_default_str()->check(CLI::Range(0, 1024));
  cmd->add_option("--cache-mib", o.cache_mib,
                  "Host prompt-cache budget, MiB: llama-server --cache-ram, prefixd --prompt-cache-capacity-bytes")
      ->capture_default_str()->check(CLI::Range(1, 1 << 22));
  cmd->add_option("--prefixd-bin", o.sources.prefixd_bin, "prefixd binary to start (default: the prefixd beside this program)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--prefixd-args", o.sources.prefixd_args, "More `prefixd serve` arguments for every prefixd target");
  cmd->add_option("--server-log", o.server_log, "Append the servers' output here (default: a temporary file, kept on error)");
  cmd->add_flag("!--no-gates", o.gates, "Skip the correctness gates");
  cmd->add_option("--disk-dir", o.disk_dir,
                  "Where a workload's disk-tier directory goes (restart: prefixd's --cache-disk-path, removed at the "
                  "end); its filesystem is what the restore and the sequential-read yardstick measure (default: "
                  "TMPDIR, else /tmp)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--startup-timeout", p.startup_s, "Seconds to wait for a server's /health")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  cmd->add_option("--request-timeout", p.request_s, "Seconds one request may take")->capture_default_str()->check(CLI::Range(1, 86400));
}

}  // namespace

std::function<int()> add_bench_command(CLI::App& app) {
  auto p = std::make_shared<Parsed>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Run workloads on prefixd alone and check its prompt cache: PASS/FAIL per target (docs/cache-benchmarks.md)");
  add_common_options(cmd, *p, joined(bench::bench_workload_names()));
  cmd->add_option("--scenario", p->workloads, "Alias of --workloads");
  cmd->add_option("--json", p->run.json_path, "Write the results file (requests, records, checks) here; zstd-compressed when FILE ends in .zst");
  cmd->add_option("--server-bin", p->run.sources.prefixd_bin, "Alias of --prefixd-bin")->check(CLI::ExistingFile);
  cmd->add_option("--extra-args", p->run.sources.prefixd_args, "Alias of --prefixd-args");
  return [p]() {
    if (p->run.model_path.empty()) throw std::invalid_argument("--model is required");
    return bench::run_bench(p->finish(), std::cout, std::cerr);
  };
}

std::function<int()> add_compare_command(CLI::App& app) {
  auto p = std::make_shared<Parsed>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Benchmark targets side by side (prefixd against llama-server by default) on the same model and "
                 "workloads (docs/benchmarks.md)");
  add_common_options(cmd, *p, joined(bench::compare_workload_names()));
  bench::RunOptions& o = p->run;
  cmd->add_option("--targets", p->targets,
                  "Comma-separated targets, the first compared with the second: " + joined(bench::target_names()))
      ->capture_default_str();
  cmd->add_option("--baseline-args", o.sources.baseline_args, "What the prefixd-baseline target adds to `prefixd serve`")
      ->capture_default_str();
  cmd->add_option("--interleave", o.interleave,
                  "Run each workload N times per target, alternating the order (A B, B A, …); the report shows the "
                  "spread of the per-repetition ratios")
      ->capture_default_str()->check(CLI::Range(1, 100));
  cmd->add_option("--out", o.out_dir, "Folder for <name>.json.zst (the raw results, compressed), <name>.md and the plots")->capture_default_str();
  cmd->add_option("--name", o.name, "File stem (default <UTC date>-<hostname>)");
  cmd->add_option("--llama-server", o.sources.llama_server_bin, "llama-server binary (a path, or a name looked up on PATH)")
      ->capture_default_str();
  cmd->add_option("--llama-args", o.sources.llama_args, "More llama-server arguments, e.g. \"--cache-reuse 256\"");
  cmd->add_option("--docs", o.docs_path, "Also write the report between the markers of this Markdown page");
  cmd->add_option("--docs-section", o.docs_section,
                  "Write it between this section's own markers instead (one page, several runs)")
      ->check([](const std::string& name) {
        // The name goes into an HTML comment: keep it to characters that cannot end one.
        const bool plain = !name.empty() && std::ranges::all_of(name, [](unsigned char c) {
          return std::isalnum(c) || c == '-' || c == '_' || c == '.';
        });
        return plain ? std::string() : std::string("letters, digits, '-', '_' and '.' only");
      });
  cmd->add_option("--variant", p->variants,
                  "Another prefixd target, NAME=ARGS: prefixd with --prefixd-args plus ARGS, run when --targets "
                  "names it (repeatable), e.g. --variant \"prefixd-swa-off=--swa-full off\"");
  cmd->add_option("--snapshot-mib", o.snapshot_mib,
                  "Give prefixd's checkpoints this much of --cache-mib (--prompt-cache-snapshot-capacity-bytes; its "
                  "host tier gets the rest), so its host memory in all equals llama-server's --cache-ram. 0: "
                  "prefixd's default, outside --cache-mib")
      ->capture_default_str()->check(CLI::Range(0, 1 << 22));
  cmd->add_flag("--token-gate", o.token_gate,
                "Fail unless every prefixd target evaluates fewer prompt tokens (warm-up included) than "
                "llama-server on every workload");
  cmd->add_option("--render", o.render_path, "Only re-render the report, plots and docs of this results file (.json or .json.zst)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("!--no-plots", o.plots, "Do not run gnuplot");
  return [p]() {
    if (p->run.render_path.empty() && p->run.model_path.empty()) {
      throw std::invalid_argument("--model is required (or --render FILE)");
    }
    return bench::run_compare(p->finish(), std::cout, std::cerr);
  };
}

}  // namespace prefixd::bench_cli
