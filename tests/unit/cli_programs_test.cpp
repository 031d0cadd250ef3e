// The commands of the three programs with their real options: the hint `prefixd` gives for a
// command that moved, prefixd-bench's commands and default server, prefixd-mkmodel's options.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench/target.h"
#include "bench_cli/commands.h"
#include "cli/commands.h"
#include "mkmodel_cli/mkmodel_options.h"

namespace prefixd {
namespace {

std::string hint(std::vector<const char*> args) {
  args.insert(args.begin(), "prefixd");
  return cli::moved_command_hint(static_cast<int>(args.size()), args.data());
}

TEST(MovedCommands, EachNamesTheProgramItWentTo) {
  for (const char* command : {"bench", "compare", "soak", "audit", "route-bench"}) {
    EXPECT_EQ(hint({command, "--model", "m.gguf"}),
              std::string("prefixd: `") + command + "` moved to the prefixd-bench program (same options: prefixd-bench " +
                  command + " --help)\n");
  }
  EXPECT_EQ(hint({"mkmodel", "--preset", "tiny"}),
            "prefixd: `mkmodel` moved to the prefixd-mkmodel program (same options: prefixd-mkmodel --help)\n");
  EXPECT_NE(hint({"--help", "soak"}), "") << "prefixd's own flags come before the command";
}

TEST(MovedCommands, NoHintForTheServersCommandsOrOtherWords) {
  EXPECT_EQ(hint({}), "");
  EXPECT_EQ(hint({"--help"}), "");
  EXPECT_EQ(hint({"serve", "--model", "m.gguf"}), "");
  EXPECT_EQ(hint({"cache", "ls", "bench"}), "") << "only the first word is the command";
  EXPECT_EQ(hint({"benchmark"}), "");
}

TEST(BenchCli, RegistersTheBenchmarkCommandsAndParsesTheirOptions) {
  CLI::App app;
  // The functions hold what the options parse into: they stay alive as long as the app.
  const std::vector<std::function<int()>> keep = {bench_cli::add_bench_command(app), bench_cli::add_compare_command(app),
                                                  bench_cli::add_soak_command(app), bench_cli::add_audit_command(app),
                                                  bench_cli::add_route_bench_command(app)};
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands({})) names.push_back(command->get_name());
  EXPECT_EQ(names, (std::vector<std::string>{"bench", "compare", "soak", "audit", "route-bench"}));

  app.parse(std::string("compare --model ") + PREFIXD_TINY_MODEL + " --targets prefixd,llama-server --prefixd-bin " +
                PREFIXD_BINARY,
            false);
  const CLI::App* compare = app.get_subcommand("compare");
  EXPECT_TRUE(compare->parsed());
  EXPECT_EQ(compare->get_option("--prefixd-bin")->as<std::string>(), PREFIXD_BINARY);
  EXPECT_EQ(compare->get_option("--targets")->as<std::string>(), "prefixd,llama-server");
}

TEST(BenchCli, TheDefaultServerIsThePrefixdBesideTheRunningProgram) {
  // The test programs are built into the same folder as prefixd.
  EXPECT_EQ(std::filesystem::path(bench::prefixd_binary("")), std::filesystem::canonical(PREFIXD_BINARY));
  EXPECT_EQ(bench::prefixd_binary("/opt/prefixd/bin/prefixd"), "/opt/prefixd/bin/prefixd");
  EXPECT_EQ(std::filesystem::path(bench::make_target("prefixd", {}).binary()), std::filesystem::canonical(PREFIXD_BINARY));
}

TEST(MkmodelCli, OptionsBelongToTheProgramItself) {
  CLI::App app;
  const std::function<int()> keep = mkmodel_cli::add_mkmodel_options(app);
  EXPECT_TRUE(app.get_subcommands({}).empty());
  app.parse("--preset tiny --type f16 --out /tmp/x.gguf --quiet", false);
  EXPECT_EQ(app.get_option("--preset")->as<std::string>(), "tiny");
  EXPECT_EQ(app.get_option("--out")->as<std::string>(), "/tmp/x.gguf");
  EXPECT_EQ(app.get_option("--type")->as<std::string>(), "f16");
  EXPECT_EQ(app.get_option("--quiet")->count(), 1u);
  EXPECT_THROW(app.parse("--type q4_0", false), CLI::ValidationError);
}

}  // namespace
}  // namespace prefixd
