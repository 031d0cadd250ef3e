#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "modelgen/modelgen.h"

namespace prefixd::cli {

std::function<int()> add_mkmodel_command(CLI::App& app) {
  auto options = std::make_shared<modelgen::GenerateOptions>();
  auto list = std::make_shared<bool>(false);
  std::string presets_help = "Preset to generate:";
  for (const auto& p : modelgen::presets()) presets_help += "\n  " + p.name + ": " + p.summary;
  CLI::App* cmd = app.add_subcommand(
      "mkmodel", "Write a GGUF model with random weights and a real architecture's shapes (for tests and demos)");
  cmd->add_option("--preset", options->preset, presets_help)->capture_default_str();
  cmd->add_option("--out", options->out_path, "Output GGUF path");
  cmd->add_option("--seed", options->seed, "Seed of the random weights (same seed, same file)")->capture_default_str();
  cmd->add_option("--type", options->weight_type, "Weight type: f32, f16 or q8_0 (default: the preset's)")
      ->check(CLI::IsMember({"", "f32", "f16", "q8_0"}));
  cmd->add_flag("--quiet", options->quiet, "Print nothing on success");
  cmd->add_flag("--list", *list, "List the presets and exit");
  return [options, list]() {
    if (*list) {
      for (const auto& p : modelgen::presets()) std::cout << p.name << "\t" << p.architecture << "\t" << p.summary << "\n";
      return 0;
    }
    if (options->out_path.empty()) {
      std::cerr << "prefixd mkmodel: error: --out is required\n";
      return 2;
    }
    modelgen::generate_model(*options);
    return 0;
  };
}

}  // namespace prefixd::cli
