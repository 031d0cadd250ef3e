// prefixd cli — where each `prefixd serve` option lives in the configuration file.
//
// One table maps every serve option (by its first long flag name, without the dashes) to exactly
// one section of the TOML file. The table is the only place that knows the layout: the reader,
// `config print` and `config init` all ask it, and a unit test checks that every option CLI11
// knows has a row and every row names an option.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace prefixd::cli {

enum class ConfigSection { server, cache, disk, model };

struct ConfigKey {
  std::string_view key;  // the flag's first long name without "--": `--http-header-timeout` -> http-header-timeout
  ConfigSection section;
};

// Every serve option's key, in the order `config init` writes them within a section.
std::span<const ConfigKey> config_keys();

// Sections in file order, and their names as they appear in brackets.
std::span<const ConfigSection> config_sections();
std::string_view section_name(ConfigSection section);
std::optional<ConfigSection> parse_section_name(std::string_view name);

// The section of `key`; nullopt when no serve option has that key.
std::optional<ConfigSection> section_of(std::string_view key);

// Whether a `[models."NAME"]` table may set `key`: keys of [model] and [cache], except the two that
// choose which model is served (model, alias).
bool overridable_per_model(std::string_view key);

}  // namespace prefixd::cli
