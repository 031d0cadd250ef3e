#include "bench_cli/commands.h"
#include "cli/subcommands.h"

int main(int argc, char** argv) {
  CLI::App app{"prefixd-bench: benchmarks and checks of prefixd servers (and llama-server) over HTTP"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("prefixd-bench 0.1.0"));
  prefixd::cli::Subcommands commands(app);
  commands.add(prefixd::bench_cli::add_bench_command);
  commands.add(prefixd::bench_cli::add_compare_command);
  commands.add(prefixd::bench_cli::add_soak_command);
  commands.add(prefixd::bench_cli::add_audit_command);
  commands.add(prefixd::bench_cli::add_route_bench_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return commands.run("prefixd-bench");
}
