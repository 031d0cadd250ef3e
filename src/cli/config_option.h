// prefixd cli — `--config FILE` on an app that holds the serve options (`serve`, `config print`).
//
// Precedence: command-line flag > environment variable > configuration file > built-in default.
// CLI11 reads configuration files only for the top-level app, and ranks a file above environment
// variables, so the file is applied here instead: a callback that runs after the command line is
// parsed and before CLI11 reads environment variables gives each option that neither a flag nor
// an environment variable sets the file's value, and runs the option's own conversion and checks
// on it then, so that a refusal names the file's line. It also records where every setting came
// from, for `config print`.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace prefixd::cli {

struct SettingSource {
  enum class Kind { flag, env, file, default_value };
  Kind kind = Kind::default_value;
  std::string detail;  // env: the variable; file: "PATH:LINE"

  // "flag", "env NAME", "PATH:LINE", "default".
  std::string describe() const;
};

// What reading the configuration file decided, complete once the app has been parsed.
struct ConfigResolution {
  std::string file;               // the --config file; empty without one
  std::string model_section;      // the [models."NAME"] table that applied; empty when none
  std::map<std::string, SettingSource, std::less<>> sources;  // every setting's key -> its source
  bool resolved = false;          // the parse reached the file step (guards a second run)
};

// What TOML type an option takes, from the type CLI11 converts its value to: integer (INT, UINT),
// real (FLOAT; an integer is accepted too), boolean (flags, BOOLEAN), text (everything else).
enum class OptionKind { integer, real, boolean, text };
OptionKind kind_of(const CLI::Option& option);

// The options of `app` that are serve settings: every option but help and --config.
std::vector<CLI::Option*> setting_options(CLI::App& app);
// The configuration key of a setting: its first long name ("--gpu-layers,--n-gpu-layers" -> gpu-layers).
std::string config_key_of(const CLI::Option& option);

// Adds `--config FILE` (env PREFIXD_CONFIG) to `app`, which must already hold every serve option.
// The returned resolution fills in while `app` is parsed. A file that cannot be read, does not
// parse, names an unknown section or key, or holds a value its option refuses (wrong type, out of
// range, not a member) makes the parse throw CLI::ConfigError naming the file, line and key.
std::shared_ptr<const ConfigResolution> add_config_option(CLI::App& app);

}  // namespace prefixd::cli
