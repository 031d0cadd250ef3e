// prefixd cli — the serve configuration file: TOML read into checked, positioned entries.
//
// The reader knows the file's layout (sections, keys, per-model tables) from config_keys.h and
// nothing about CLI11: it returns values with their line and column, or a message that names the
// file, the line and the key. Deciding whether a value suits its option, and precedence against
// flags and environment variables, belong to config_option.h.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cli/config_keys.h"

namespace prefixd::cli {

// A value as TOML typed it; options accept the types that match theirs (config_option.cpp).
using ConfigValue = std::variant<std::int64_t, double, bool, std::string>;

struct ConfigEntry {
  std::string key;
  ConfigSection section = ConfigSection::server;  // the section the key belongs to
  ConfigValue value;
  std::string table;  // where it was written: "[server]", "[models.\"name\"]"
  std::uint32_t line = 0;
};

// A `[models."NAME"]` table: settings that apply only when the served model's file name or its
// alias is NAME.
struct ModelOverride {
  std::string name;
  std::uint32_t line = 0;
  std::vector<ConfigEntry> entries;
};

struct ConfigFile {
  std::string path;
  std::vector<ConfigEntry> entries;  // [server], [cache], [disk], [model]
  std::vector<ModelOverride> models;

  // The base entry for `key`, or null.
  const ConfigEntry* find(std::string_view key) const;
  // The settings for a served model: the base entries, with those of the one [models."NAME"]
  // table whose NAME equals `model_file_name` or `alias` taking their place. Two matching tables
  // are an error (naming both lines): which should win would be a guess.
  struct ModelSettings {
    std::vector<ConfigEntry> entries;
    std::string model;  // the NAME of the [models."NAME"] table that applied; empty when none did
  };
  std::expected<ModelSettings, std::string> settings_for(std::string_view model_file_name,
                                                         std::string_view alias) const;
};

// Reads and checks `path`. Errors: the file cannot be read, a TOML syntax error, an unknown
// section or key, a key outside any section, a value that is not a string, integer, float or
// boolean; each message starts with "PATH:LINE:".
std::expected<ConfigFile, std::string> read_config_file(const std::string& path);
// The same for text already in memory; `path` only names it in messages.
std::expected<ConfigFile, std::string> parse_config_text(std::string_view text, const std::string& path);

// The value as a command-line argument would spell it ("8080", "0.5", "true", "text").
std::string value_text(const ConfigValue& value);
// "an integer", "a float", "a boolean", "a string": for messages.
std::string_view value_type_name(const ConfigValue& value);

}  // namespace prefixd::cli
