// prefixd bench_cli — the `prefixd-bench` program: the benchmark client's subcommands (bench,
// compare, soak, audit, route-bench), each registered on a CLI11 app. The servers it measures are
// the `prefixd` beside it unless --prefixd-bin names another (bench/target.h, prefixd_binary).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace prefixd::bench_cli {

// Each registers its subcommand and returns the function that runs it (exit status).
std::function<int()> add_bench_command(CLI::App& app);
std::function<int()> add_compare_command(CLI::App& app);
std::function<int()> add_soak_command(CLI::App& app);
std::function<int()> add_audit_command(CLI::App& app);
std::function<int()> add_route_bench_command(CLI::App& app);

}  // namespace prefixd::bench_cli
