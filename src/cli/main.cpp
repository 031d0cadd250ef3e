#include <iostream>

#include "cli/commands.h"
#include "cli/subcommands.h"

int main(int argc, char** argv) {
  CLI::App app{"prefixd: an LLM inference server whose heart is a prompt-prefix KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("prefixd 0.1.0"));
  app.footer("Benchmarks: prefixd-bench. Test models: prefixd-mkmodel.");
  prefixd::cli::Subcommands commands(app);
  commands.add(prefixd::cli::add_serve_command);
  commands.add(prefixd::cli::add_cache_command);
  commands.add(prefixd::cli::add_config_command);
  commands.add(prefixd::cli::add_route_command);
  commands.add(prefixd::cli::add_pull_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    // A command that moved to another program fails, `--help` after it too, and says where it went.
    const std::string moved = prefixd::cli::moved_command_hint(argc, argv);
    if (moved.empty()) return status;
    std::cerr << moved;
    return status != 0 ? status : 2;
  }
  return commands.run("prefixd");
}
