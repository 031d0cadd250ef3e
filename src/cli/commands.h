// prefixd cli — the `prefixd` binary: one subcommand per job, each registered on a CLI11 app.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace prefixd::cli {

// Each registers its subcommand and returns the function that runs it (exit status).
std::function<int()> add_serve_command(CLI::App& app);
std::function<int()> add_mkmodel_command(CLI::App& app);
std::function<int()> add_bench_command(CLI::App& app);
std::function<int()> add_compare_command(CLI::App& app);
std::function<int()> add_cache_command(CLI::App& app);
std::function<int()> add_soak_command(CLI::App& app);
std::function<int()> add_config_command(CLI::App& app);
std::function<int()> add_route_command(CLI::App& app);
std::function<int()> add_route_bench_command(CLI::App& app);
std::function<int()> add_audit_command(CLI::App& app);

// Registers every `prefixd serve` option on `cmd` (serve itself, `config print`, `config init`);
// the returned function runs the server with the parsed values and keeps them alive.
std::function<int()> add_serve_options(CLI::App& cmd);

}  // namespace prefixd::cli
