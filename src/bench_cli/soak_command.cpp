// `prefixd-bench soak`: options in, bench::run_soak out (bench/soak.h).
#include <iostream>
#include <memory>
#include <stdexcept>

#include "bench/soak.h"
#include "bench_cli/commands.h"

namespace prefixd::bench_cli {

std::function<int()> add_soak_command(CLI::App& app) {
  struct Parsed {
    bench::SoakOptions options;
    int seconds = 1800;
    int reset_s = 120;
    int startup_s = 600;
    int request_s = 600;
  };
  auto p = std::make_shared<Parsed>();
  bench::SoakOptions& o = p->options;
  CLI::App* cmd = app.add_subcommand(
      "soak", "Soak test: concurrent clients against one prefixd server for a long time, its RSS held against the "
              "configured budgets (docs/operator-guide.md, \"Soak test\")");
  cmd->add_option("-m,--model", o.model_path, "GGUF model the server loads")->required()->check(CLI::ExistingFile);
  cmd->add_option("--seconds", p->seconds, "How long the clients send requests")->capture_default_str()->check(CLI::Range(1, 7 * 86400));
  cmd->add_option("--clients", o.clients, "Concurrent clients")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", o.seed, "Traffic seed (the same seed sends the same requests, replies aside)")->capture_default_str();
  cmd->add_option("--parallel", o.parallel, "The server's --parallel")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--ctx-size", o.ctx_size, "The server's --ctx-size")->capture_default_str()->check(CLI::Range(256, 1 << 22));
  cmd->add_option("-t,--threads", o.threads, "The server's --threads (0: every CPU)")->capture_default_str()->check(CLI::Range(0, 1024));
  cmd->add_option("--cache-mib", o.cache_mib,
                  "Host memory for cached prompts, MiB: the host tier gets it less --snapshot-mib")
      ->capture_default_str()->check(CLI::Range(1, 1 << 22));
  cmd->add_option("--snapshot-mib", o.snapshot_mib, "Of --cache-mib, MiB for checkpoints")
      ->capture_default_str()->check(CLI::Range(1, 1 << 22));
  cmd->add_option("--margin-mib", o.margin_mib,
                  "What RSS may exceed the cache budgets, the KV context and the model file by before the run fails")
      ->capture_default_str()->check(CLI::Range(0, 1 << 22));
  cmd->add_option("--reset-every", p->reset_s, "Seconds between cache resets (0: none)")->capture_default_str()->check(CLI::Range(0, 86400));
  cmd->add_option("--out", o.out_dir, "Folder for soak.json, soak.md, soak.png and the server log")->capture_default_str();
  cmd->add_option("--prefixd-bin", o.prefixd_bin, "prefixd binary to serve with (default: the prefixd beside this program)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--prefixd-args", o.prefixd_args, "More `prefixd serve` arguments");
  cmd->add_option("--server-log", o.server_log, "The server's output (default: <out>/server.log)");
  cmd->add_option("--startup-timeout", p->startup_s, "Seconds to wait for the server's /health")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  cmd->add_option("--request-timeout", p->request_s, "Seconds one request may take")->capture_default_str()->check(CLI::Range(1, 86400));
  return [p]() {
    bench::SoakOptions options = p->options;
    if (options.snapshot_mib >= options.cache_mib) throw std::invalid_argument("--snapshot-mib must be below --cache-mib");
    options.duration = std::chrono::seconds(p->seconds);
    options.reset_every = std::chrono::seconds(p->reset_s);
    options.startup_timeout = std::chrono::seconds(p->startup_s);
    options.request_timeout = std::chrono::seconds(p->request_s);
    return bench::run_soak(options, std::cout, std::cerr);
  };
}

}  // namespace prefixd::bench_cli
