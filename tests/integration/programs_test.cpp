// The three programs as they are run: `prefixd` has the server and its operator commands only and
// says where a command that moved went; `prefixd-bench` has the benchmark client's commands and
// starts the `prefixd` beside it; `prefixd-mkmodel` writes a model from its own options.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "server_process.h"
#include "support/disk_fixtures.h"

namespace prefixd::testing {
namespace {

namespace fs = std::filesystem;

// stdout and stderr together.
CommandResult run(const std::string& program, const std::string& args) { return run_shell(program + " " + args + " 2>&1"); }

// The names CLI11's help lists under SUBCOMMANDS.
std::set<std::string> subcommands_in_help(const std::string& help) {
  std::set<std::string> names;
  std::istringstream lines(help);
  std::string line;
  bool in_section = false;
  while (std::getline(lines, line)) {
    if (line.starts_with("SUBCOMMANDS:")) {
      in_section = true;
    } else if (in_section && line.empty()) {
      break;
    } else if (in_section && line.starts_with("  ") && line[2] != ' ') {
      names.insert(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  return names;
}

TEST(Programs, PrefixdHelpListsTheServerAndItsOperatorCommandsOnly) {
  const CommandResult help = run(PREFIXD_BINARY, "--help");
  ASSERT_EQ(help.status, 0) << help.output;
  EXPECT_EQ(subcommands_in_help(help.output), (std::set<std::string>{"serve", "cache", "config", "route", "pull"}))
      << help.output;
}

TEST(Programs, ACommandThatLeftPrefixdFailsAndNamesItsProgram) {
  const std::array<std::pair<const char*, const char*>, 6> moved = {{{"bench", "prefixd-bench"},
                                                                     {"compare", "prefixd-bench"},
                                                                     {"soak", "prefixd-bench"},
                                                                     {"audit", "prefixd-bench"},
                                                                     {"route-bench", "prefixd-bench"},
                                                                     {"mkmodel", "prefixd-mkmodel"}}};
  for (const auto& [command, program] : moved) {
    const CommandResult result = run(PREFIXD_BINARY, std::string(command) + " --model x");
    EXPECT_NE(result.status, 0) << command;
    EXPECT_NE(result.output.find("Run with --help for more information."), std::string::npos)
        << "CLI11's own error first: " << result.output;
    EXPECT_NE(result.output.find(std::string("prefixd: `") + command + "` moved to the " + program + " program"),
              std::string::npos)
        << result.output;
  }
  const CommandResult help = run(PREFIXD_BINARY, "bench --help");
  EXPECT_NE(help.status, 0) << "there is no `bench` to show the help of";
  EXPECT_NE(help.output.find("prefixd: `bench` moved to the prefixd-bench program"), std::string::npos) << help.output;
  const CommandResult unknown = run(PREFIXD_BINARY, "benchmark");
  EXPECT_NE(unknown.status, 0);
  EXPECT_EQ(unknown.output.find("moved to"), std::string::npos) << "no hint for a name that never was a command";
}

TEST(Programs, PrefixdBenchHasTheBenchmarkCommands) {
  const CommandResult help = run(PREFIXD_BENCH_BINARY, "--help");
  ASSERT_EQ(help.status, 0) << help.output;
  EXPECT_EQ(subcommands_in_help(help.output),
            (std::set<std::string>{"bench", "compare", "soak", "audit", "route-bench"}))
      << help.output;
  const CommandResult compare = run(PREFIXD_BENCH_BINARY, "compare --help");
  ASSERT_EQ(compare.status, 0) << compare.output;
  for (const char* option : {"--model", "--targets", "--workloads", "--prefixd-bin", "--llama-server", "--render"}) {
    EXPECT_NE(compare.output.find(option), std::string::npos) << option << " in\n" << compare.output;
  }
  EXPECT_EQ(run(PREFIXD_BENCH_BINARY, "--version").output, "prefixd-bench 0.1.0\n");
  const CommandResult missing = run(PREFIXD_BENCH_BINARY, "bench");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("prefixd-bench bench: error: --model is required"), std::string::npos) << missing.output;
  EXPECT_NE(run(PREFIXD_BENCH_BINARY, "serve").status, 0) << "the server is not one of its commands";
}

TEST(Programs, PrefixdMkmodelTakesItsOptionsWithoutASubcommand) {
  const CommandResult help = run(PREFIXD_MKMODEL_BINARY, "--help");
  ASSERT_EQ(help.status, 0) << help.output;
  for (const char* option : {"--preset", "--out", "--seed", "--type", "--quiet", "--list"}) {
    EXPECT_NE(help.output.find(option), std::string::npos) << option << " in\n" << help.output;
  }
  EXPECT_TRUE(subcommands_in_help(help.output).empty()) << help.output;

  const CommandResult no_out = run(PREFIXD_MKMODEL_BINARY, "--preset tiny --quiet");
  EXPECT_EQ(no_out.status, 2);
  EXPECT_NE(no_out.output.find("prefixd-mkmodel: error: --out is required"), std::string::npos) << no_out.output;
  EXPECT_NE(run(PREFIXD_MKMODEL_BINARY, "--preset no-such-preset --out /dev/null --quiet").status, 0);

  // The tiny test model was written the same way: the same preset and seed give the same bytes.
  const TempDir dir("mkmodel");
  const fs::path out = dir.path() / "tiny.gguf";
  const CommandResult written = run(PREFIXD_MKMODEL_BINARY, "--preset tiny --out '" + out.string() + "' --quiet");
  ASSERT_EQ(written.status, 0) << written.output;
  EXPECT_EQ(written.output, "") << "--quiet";
  std::ifstream a(out, std::ios::binary);
  std::ifstream b(PREFIXD_TINY_MODEL, std::ios::binary);
  const std::string ours(std::istreambuf_iterator<char>(a), {});
  const std::string tiny(std::istreambuf_iterator<char>(b), {});
  EXPECT_EQ(ours.size(), tiny.size());
  EXPECT_TRUE(ours == tiny);
}

// Without --prefixd-bin, prefixd-bench serves with the prefixd in its own folder: a soak of a few
// seconds on the tiny model, whose server log starts with the command line it ran.
TEST(Programs, PrefixdBenchStartsThePrefixdBesideIt) {
  const TempDir dir("bench-sibling");
  const CommandResult soak =
      run(PREFIXD_BENCH_BINARY, std::string("soak --model ") + PREFIXD_TINY_MODEL +
                                    " --seconds 2 --clients 1 --parallel 1 --ctx-size 2048 --threads 1 --cache-mib 64"
                                    " --snapshot-mib 16 --margin-mib 4096 --reset-every 0 --startup-timeout 60 --out '" +
                                    dir.path().string() + "'");
  std::ifstream log(dir.path() / "server.log");
  const std::string text(std::istreambuf_iterator<char>(log), {});
  const std::string started = "=== " + fs::canonical(PREFIXD_BINARY).string() + " serve --model ";
  EXPECT_NE(text.find(started), std::string::npos) << "expected " << started << " in\n" << text << "\n" << soak.output;
  EXPECT_EQ(soak.status, 0) << soak.output;
}

}  // namespace
}  // namespace prefixd::testing
