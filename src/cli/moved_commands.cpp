// Where the subcommands that left `prefixd` went: the benchmark client and the model generator
// are programs of their own, so that the server links neither.
#include <array>
#include <format>
#include <string_view>

#include "cli/commands.h"

namespace prefixd::cli {
namespace {

struct Moved {
  std::string_view command;
  std::string_view program;
  std::string_view invocation;  // how the same thing is run now
};

constexpr std::array<Moved, 6> kMoved = {{
    {"bench", "prefixd-bench", "prefixd-bench bench"},
    {"compare", "prefixd-bench", "prefixd-bench compare"},
    {"soak", "prefixd-bench", "prefixd-bench soak"},
    {"audit", "prefixd-bench", "prefixd-bench audit"},
    {"route-bench", "prefixd-bench", "prefixd-bench route-bench"},
    {"mkmodel", "prefixd-mkmodel", "prefixd-mkmodel"},
}};

}  // namespace

std::string moved_command_hint(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    if (word.starts_with('-')) continue;  // `prefixd` itself takes only flags
    for (const Moved& m : kMoved) {
      if (word == m.command) {
        return std::format("prefixd: `{}` moved to the {} program (same options: {} --help)\n", m.command, m.program,
                           m.invocation);
      }
    }
    return {};
  }
  return {};
}

}  // namespace prefixd::cli
