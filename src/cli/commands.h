// prefixd cli — the `prefixd` binary: the server and its operator commands, one subcommand per
// job, each registered on a CLI11 app. The benchmark client and the model generator are programs
// of their own (src/bench_cli/, src/mkmodel_cli/).
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace prefixd::cli {

// Each registers its subcommand and returns the function that runs it (exit status).
std::function<int()> add_serve_command(CLI::App& app);
std::function<int()> add_cache_command(CLI::App& app);
std::function<int()> add_config_command(CLI::App& app);
std::function<int()> add_route_command(CLI::App& app);
std::function<int()> add_pull_command(CLI::App& app);

// Registers every `prefixd serve` option on `cmd` (serve itself, `config print`, `config init`);
// the returned function runs the server with the parsed values and keeps them alive.
std::function<int()> add_serve_options(CLI::App& cmd);

// When the first word after the program name is a subcommand that `prefixd` no longer has (bench,
// compare, soak, audit and route-bench went to prefixd-bench, mkmodel to prefixd-mkmodel), the
// line that says where it went; empty otherwise.
std::string moved_command_hint(int argc, const char* const* argv);

}  // namespace prefixd::cli
