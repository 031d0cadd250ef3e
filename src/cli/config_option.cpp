#include "cli/config_option.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <format>
#include <optional>

#include "cli/config_file.h"

namespace prefixd::cli {
namespace {

bool accepts(OptionKind kind, const ConfigValue& value) {
  switch (kind) {
    case OptionKind::integer: return std::holds_alternative<std::int64_t>(value);
    case OptionKind::real: return std::holds_alternative<std::int64_t>(value) || std::holds_alternative<double>(value);
    case OptionKind::boolean: return std::holds_alternative<bool>(value);
    case OptionKind::text: return std::holds_alternative<std::string>(value);
  }
  return false;
}

std::string_view kind_name(OptionKind kind) {
  switch (kind) {
    case OptionKind::integer: return "an integer";
    case OptionKind::real: return "a number";
    case OptionKind::boolean: return "true or false";
    case OptionKind::text: return "a string";
  }
  return "?";
}

// The option's environment variable's value; empty when it has none or it is unset (CLI11 also
// ignores an empty variable).
std::string env_value(const CLI::Option& option) {
  const std::string name = option.get_envname();
  if (name.empty()) return {};
  const char* value = std::getenv(name.c_str());
  return value != nullptr ? value : "";
}

// `key`'s value from a flag, else its environment variable, else the file's base sections: what
// chooses the [models."NAME"] table before any of them is applied.
std::string early_value(const CLI::App& app, const std::string& key, const ConfigFile& file) {
  const CLI::Option* option = app.get_option_no_throw("--" + key);
  if (option == nullptr) return {};
  if (option->count() > 0) return option->results().back();
  if (std::string env = env_value(*option); !env.empty()) return env;
  const ConfigEntry* entry = file.find(key);
  if (entry != nullptr && std::holds_alternative<std::string>(entry->value)) return std::get<std::string>(entry->value);
  return {};
}

// Gives `option` the file's value as if it had been typed, then runs its conversion and checks.
void apply_entry(CLI::Option& option, const ConfigEntry& entry, const std::string& path) {
  const std::string where = std::format("{}:{}: {} {}", path, entry.line, entry.table, entry.key);
  const OptionKind kind = kind_of(option);
  if (!accepts(kind, entry.value)) {
    throw CLI::ConfigError(std::format("{}: expected {}, found {} ({})", where, kind_name(kind),
                                       value_type_name(entry.value), value_text(entry.value)));
  }
  const std::string text = value_text(entry.value);
  try {
    option.add_result(option.get_expected_min() == 0 ? option.get_flag_value(entry.key, text) : text);
    option.run_callback();
  } catch (const CLI::Error& e) {
    throw CLI::ConfigError(std::format("{} = {}: {}", where, text, e.what()));
  }
}

// `given`: the --config flag's value, empty without one.
void resolve(CLI::App& app, const std::string& given, ConfigResolution& resolution) {
  if (resolution.resolved || !app.parsed()) return;  // another subcommand runs, or the file was applied already
  resolution.resolved = true;
  if (given.empty()) {
    const char* env = std::getenv("PREFIXD_CONFIG");
    resolution.file = env != nullptr ? env : "";
  } else {
    resolution.file = given;
  }
  std::optional<ConfigFile> file;
  std::vector<ConfigEntry> settings;
  if (!resolution.file.empty()) {
    auto read = read_config_file(resolution.file);
    if (!read) throw CLI::ConfigError(read.error());
    file = std::move(*read);
    const std::string model_name = std::filesystem::path(early_value(app, "model", *file)).filename().string();
    auto chosen = file->settings_for(model_name, early_value(app, "alias", *file));
    if (!chosen) throw CLI::ConfigError(chosen.error());
    settings = std::move(chosen->entries);
    resolution.model_section = chosen->model;
  }
  for (CLI::Option* option : setting_options(app)) {
    const std::string key = config_key_of(*option);
    SettingSource& source = resolution.sources[key];
    if (option->count() > 0) {
      source = {SettingSource::Kind::flag, {}};
    } else if (!env_value(*option).empty()) {
      source = {SettingSource::Kind::env, option->get_envname()};  // CLI11 applies it next
    } else if (const auto entry = std::ranges::find(settings, key, &ConfigEntry::key); entry != settings.end()) {
      apply_entry(*option, *entry, file->path);
      source = {SettingSource::Kind::file, std::format("{}:{}", file->path, entry->line)};
    } else {
      source = {SettingSource::Kind::default_value, {}};
    }
  }
}

}  // namespace

OptionKind kind_of(const CLI::Option& option) {
  if (option.get_expected_min() == 0) return OptionKind::boolean;  // a flag
  std::string type = option.get_type_name();
  type = type.substr(0, type.find(':'));  // "INT:INT in [0 - 65535]" -> "INT"
  if (type == "INT" || type == "UINT") return OptionKind::integer;
  if (type == "FLOAT") return OptionKind::real;
  if (type == "BOOLEAN") return OptionKind::boolean;
  return OptionKind::text;
}

std::string SettingSource::describe() const {
  switch (kind) {
    case Kind::flag: return "flag";
    case Kind::env: return "env " + detail;
    case Kind::file: return detail;
    case Kind::default_value: return "default";
  }
  return "?";
}

std::vector<CLI::Option*> setting_options(CLI::App& app) {
  return app.get_options([&app](const CLI::Option* option) {
    return option != app.get_help_ptr() && option != app.get_help_all_ptr() && option->get_configurable() &&
           !option->get_lnames().empty();
  });
}

std::string config_key_of(const CLI::Option& option) { return option.get_lnames().front(); }

std::shared_ptr<const ConfigResolution> add_config_option(CLI::App& app) {
  auto resolution = std::make_shared<ConfigResolution>();
  // The callback sees `--config FILE`'s value, or an empty one: it is forced so that a file named
  // only by PREFIXD_CONFIG is read as well (CLI11 reads environment variables after this).
  CLI::Option* config = app.add_option(
      "--config",
      [&app, resolution](const CLI::results_t& results) {
        const std::string given = results.empty() ? std::string() : results.back();
        resolve(app, given, *resolution);
        return true;
      },
      "TOML file of settings (sections [server], [model], [cache], [disk], [models.\"NAME\"]); flags and "
      "environment variables override it");
  config->envname("PREFIXD_CONFIG")->configurable(false)->type_name("FILE");
  // First priority: after the command line, before CLI11 reads environment variables and runs the
  // other options' callbacks.
  config->callback_priority(CLI::CallbackPriority::First)->force_callback();
  return resolution;
}

}  // namespace prefixd::cli
