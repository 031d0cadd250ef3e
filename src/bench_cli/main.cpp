#include <iostream>
#include <map>

#include "bench_cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"prefixd-bench: benchmarks and checks of prefixd servers (and llama-server) over HTTP"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("prefixd-bench 0.1.0"));
  std::map<CLI::App*, std::function<int()>> runners;
  auto add = [&](auto&& register_command) {
    auto run = register_command(app);
    runners.emplace(app.get_subcommands({}).back(), std::move(run));
  };
  add(prefixd::bench_cli::add_bench_command);
  add(prefixd::bench_cli::add_compare_command);
  add(prefixd::bench_cli::add_soak_command);
  add(prefixd::bench_cli::add_audit_command);
  add(prefixd::bench_cli::add_route_bench_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [command, run] : runners) {
    if (command->parsed()) {
      try {
        return run();
      } catch (const std::exception& e) {
        std::cerr << "prefixd-bench " << command->get_name() << ": error: " << e.what() << "\n";
        return 1;
      }
    }
  }
  return 1;
}
