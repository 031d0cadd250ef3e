// prefixd cli — the serve settings written out: `config print`'s table and JSON, `config init`'s
// commented TOML file. Each reads the options of an app that holds every serve option (and, for
// print, the resolution its --config option recorded while it was parsed).
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/config_option.h"

namespace prefixd::cli {

// The option's current value as its variable holds it ("8080", "true", "127.0.0.1"; "" unset).
std::string current_value(CLI::Option& option);

// Every setting in section order: section, key, value, source; secrets (api-key) are masked.
std::string settings_table(CLI::App& app, const ConfigResolution& resolution);
nlohmann::json settings_json(CLI::App& app, const ConfigResolution& resolution);

// A TOML file with every setting of `app` at its current value, each under its help text, flag
// and environment variable. Settings whose value is empty (no default, such as model or alias)
// are written commented out, so that loading the file changes nothing.
std::string config_template(CLI::App& app);

}  // namespace prefixd::cli
