// prefixd cli — the dispatch every program of several subcommands shares (prefixd, prefixd-bench):
// each subcommand registers itself on the app and hands back its runner; after parsing, the one
// chosen runs, and an exception it throws becomes "<program> <command>: error: <what>", status 1.
// Header-only, so that each program links only its own commands.
#pragma once

#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <string_view>
#include <utility>

#include <CLI/CLI.hpp>

namespace prefixd::cli {

class Subcommands {
 public:
  explicit Subcommands(CLI::App& app) : app_(app) {}

  void add(const std::function<std::function<int()>(CLI::App&)>& register_command) {
    auto run = register_command(app_);
    runners_.emplace(app_.get_subcommands({}).back(), std::move(run));
  }

  // Runs the parsed subcommand (the app requires one); 1 when none was parsed.
  int run(std::string_view program) const {
    for (const auto& [command, run] : runners_) {
      if (!command->parsed()) continue;
      try {
        return run();
      } catch (const std::exception& e) {
        std::cerr << program << " " << command->get_name() << ": error: " << e.what() << "\n";
        return 1;
      }
    }
    return 1;
  }

 private:
  CLI::App& app_;
  std::map<CLI::App*, std::function<int()>> runners_;
};

}  // namespace prefixd::cli
