#include <iostream>
#include <map>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"prefixd: an LLM inference server whose heart is a prompt-prefix KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("prefixd 0.1.0"));
  app.footer("Benchmarks: prefixd-bench. Test models: prefixd-mkmodel.");
  std::map<CLI::App*, std::function<int()>> runners;
  auto add = [&](auto&& register_command) {
    auto run = register_command(app);
    runners.emplace(app.get_subcommands({}).back(), std::move(run));
  };
  add(prefixd::cli::add_serve_command);
  add(prefixd::cli::add_cache_command);
  add(prefixd::cli::add_config_command);
  add(prefixd::cli::add_route_command);

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
  for (auto& [command, run] : runners) {
    if (command->parsed()) {
      try {
        return run();
      } catch (const std::exception& e) {
        std::cerr << "prefixd " << command->get_name() << ": error: " << e.what() << "\n";
        return 1;
      }
    }
  }
  return 1;
}
