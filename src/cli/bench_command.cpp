// `prefixd bench`: options in, bench::run_bench out. The benchmark itself lives in src/bench.
#include <iostream>
#include <memory>

#include "bench/bench.h"
#include "cli/commands.h"

namespace prefixd::cli {

std::function<int()> add_bench_command(CLI::App& app) {
  auto o = std::make_shared<bench::BenchOptions>();
  auto startup_s = std::make_shared<int>(600);
  auto request_s = std::make_shared<int>(3600);
  CLI::App* cmd = app.add_subcommand(
      "bench", "Start a prefixd server and measure its prompt cache (TTFT, fed tokens, memory) over HTTP");
  std::vector<std::string> names = bench::scenario_names();
  names.push_back("all");
  cmd->add_option("--scenario", o->scenario,
                  "resend: one prompt cold vs warm; grow: an 8-turn chat; shared: sessions sharing a system "
                  "prompt; thrash: 3 sessions on 1 slot; burst: 8 requests at once sharing a prefix; all")
      ->capture_default_str()->check(CLI::IsMember(names));
  cmd->add_option("-m,--model", o->model_path, "GGUF model the server loads")->required()->check(CLI::ExistingFile);
  cmd->add_option("--tokens", o->tokens,
                  "Main prompt size: resend prompt (default 2048), burst prefix (2048), shared system prompt (1000), "
                  "thrash history (500), grow system prompt (300)")
      ->check(CLI::Range(16, 1 << 20));
  cmd->add_option("--reps", o->reps, "Warm repetitions of resend (default 5)")->check(CLI::Range(1, 10000));
  cmd->add_option("--cold-reps", o->cold_reps, "Cold repetitions of resend")->capture_default_str()->check(CLI::Range(1, 10000));
  cmd->add_option("--sessions", o->sessions, "Sessions of shared, requests of burst")
      ->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--json", o->json_path, "Write the results as JSON to this file");
  cmd->add_option("--server-bin", o->server_bin, "prefixd binary to start (default: this one)")->check(CLI::ExistingFile);
  cmd->add_option("--port", o->port, "Port for the server (default: a free one)")->check(CLI::Range(0, 65535));
  cmd->add_option("-t,--threads", o->threads, "--threads of the server (default: its own)")->check(CLI::Range(0, 1024));
  cmd->add_option("-c,--ctx-size", o->ctx_size, "--ctx-size of the server (default: sized per scenario)")
      ->check(CLI::Range(16, 1 << 22));
  cmd->add_option("--extra-args", o->extra_args, "More `serve` arguments, e.g. \"--batch-size 1024 --apc-enabled false\"");
  cmd->add_option("--server-log", o->server_log, "Append the server's output here (default: a temporary file, kept on error)");
  cmd->add_option("--startup-timeout", *startup_s, "Seconds to wait for the server's /health")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  cmd->add_option("--request-timeout", *request_s, "Seconds one request may take (cold prefills of long prompts are slow)")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  return [o, startup_s, request_s]() {
    o->startup_timeout = std::chrono::seconds(*startup_s);
    o->request_timeout = std::chrono::seconds(*request_s);
    return bench::run_bench(*o, std::cout, std::cerr);
  };
}

}  // namespace prefixd::cli
