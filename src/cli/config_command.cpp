// `prefixd config print` and `prefixd config init`: the serve settings, where each came from, and a
// commented configuration file to start from.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/config_option.h"
#include "cli/config_render.h"

namespace prefixd::cli {
namespace {

struct PrintCommand {
  std::function<int()> keep_options;  // owns the variables the serve options write
  std::shared_ptr<const ConfigResolution> resolution;
  CLI::App* app = nullptr;
  bool json = false;

  int run() const {
    if (json) {
      std::cout << settings_json(*app, *resolution).dump(2) << "\n";
    } else {
      std::cout << settings_table(*app, *resolution);
    }
    return 0;
  }
};

struct InitCommand {
  std::string path;  // empty: stdout
  bool force = false;

  int run() const {
    CLI::App defaults;  // never parsed: its options hold the built-in defaults
    const auto keep_options = add_serve_options(defaults);
    const std::string text = config_template(defaults);
    if (path.empty()) {
      std::cout << text;
      return 0;
    }
    if (!force && std::filesystem::exists(path)) {
      throw std::runtime_error(path + " exists; pass --force to overwrite it");
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw std::runtime_error("cannot write " + path);
    std::cerr << "wrote " << path << "\n";
    return 0;
  }
};

}  // namespace

std::function<int()> add_config_command(CLI::App& app) {
  CLI::App* config = app.add_subcommand("config", "The serve configuration file: show effective settings, write a "
                                                  "template");
  config->require_subcommand(1);

  auto print = std::make_shared<PrintCommand>();
  print->app = config->add_subcommand("print", "Print every effective serve setting, its value and where it came "
                                               "from (flag, env NAME, FILE:LINE, default); takes serve's options");
  print->keep_options = add_serve_options(*print->app);
  for (CLI::Option* option : setting_options(*print->app)) option->required(false);  // printing needs no model
  print->resolution = add_config_option(*print->app);
  print->app->add_flag("--json", print->json, "Machine-readable output")->configurable(false);

  auto init = std::make_shared<InitCommand>();
  CLI::App* init_app = config->add_subcommand("init", "Write a commented TOML file with every serve setting at its "
                                                      "default");
  init_app->add_option("path", init->path, "File to write (default: standard output)");
  init_app->add_flag("--force", init->force, "Overwrite PATH if it exists");

  return [print, init, init_app] { return init_app->parsed() ? init->run() : print->run(); };
}

}  // namespace prefixd::cli
