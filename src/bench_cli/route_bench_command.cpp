// `prefixd-bench route-bench`: options in, bench::run_route_bench out (bench/route_bench.h).
#include <iostream>
#include <memory>

#include "bench/route_bench.h"
#include "bench_cli/commands.h"

namespace prefixd::bench_cli {

std::function<int()> add_route_bench_command(CLI::App& app) {
  auto o = std::make_shared<bench::RouteBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "route-bench", "The multi-session chat trace through `prefixd route` in front of several backends: prefix "
                     "policy (following KV events, and polling summaries) against round-robin, interleaved A B C C B A "
                     "(docs/benchmarks.md, \"Router\")");
  cmd->add_option("-m,--model", o->model_path, "GGUF model every backend loads")->required()->check(CLI::ExistingFile);
  cmd->add_option("--backends", o->backends, "Backends behind the routers")->capture_default_str()->check(CLI::Range(2, 16));
  cmd->add_option("-t,--threads", o->threads, "Each backend's --threads")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--pairs", o->pairs, "Pairs of runs (each runs every router once; 2 pairs: A B C C B A)")
      ->capture_default_str()->check(CLI::Range(1, 100));
  cmd->add_option("--seed", o->seed, "Trace seed")->capture_default_str();
  cmd->add_option("--scale", o->scale, "Multiplies every token length of the trace")->capture_default_str()->check(CLI::Range(0.05, 100.0));
  cmd->add_option("--load-weight", o->load_weight, "The prefix router's --load-weight")->capture_default_str();
  cmd->add_option("--backend-args", o->backend_args, "More `prefixd serve` arguments for every backend");
  cmd->add_flag("--kv-events,!--no-kv-events", o->kv_events,
                "Backends publish KV events, and a prefix router that follows them runs beside the one that polls")
      ->capture_default_str();
  cmd->add_option("--kill-backend-after", o->kill_after,
                  "After the pairs, one more prefix run in which backend 0 is killed once this many requests have "
                  "finished (0: none); any failed request fails the benchmark")
      ->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--prefixd-bin", o->prefixd_bin,
                  "prefixd binary for the backends and routers (default: the prefixd beside this program)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", o->out_path, "Write the results as JSON here");
  cmd->add_option("--log-dir", o->log_dir, "Folder for the servers' and routers' logs")->capture_default_str();
  return [o]() {
    bench::run_route_bench(*o, std::cout);
    return 0;
  };
}

}  // namespace prefixd::bench_cli
