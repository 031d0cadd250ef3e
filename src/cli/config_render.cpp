#include "cli/config_render.h"

#include <algorithm>
#include <array>
#include <format>
#include <sstream>

#include <toml++/toml.hpp>

#include "cli/config_keys.h"

namespace prefixd::cli {
namespace {

// Settings whose value `config print` does not show.
bool is_secret(std::string_view key) { return key == "api-key"; }

// One row per setting, in the table's section order and, within a section, the table's key order.
struct Row {
  std::string_view section;
  std::string key;
  CLI::Option* option;
};

std::vector<Row> rows_of(CLI::App& app) {
  std::vector<Row> rows;
  for (ConfigSection section : config_sections()) {
    for (const ConfigKey& key : config_keys()) {
      if (key.section != section) continue;
      CLI::Option* option = app.get_option_no_throw("--" + std::string(key.key));
      if (option != nullptr) rows.push_back({section_name(section), std::string(key.key), option});
    }
  }
  return rows;
}

std::string shown_value(const Row& row) {
  std::string value = current_value(*row.option);
  if (value.empty()) return "(unset)";
  return is_secret(row.key) ? "(set)" : value;
}

SettingSource source_of(const ConfigResolution& resolution, const std::string& key) {
  const auto found = resolution.sources.find(key);
  return found == resolution.sources.end() ? SettingSource{} : found->second;
}

std::string toml_string(const std::string& text) {
  std::ostringstream out;
  out << toml::value<std::string>(text);
  return out.str();
}

// The value as a TOML literal of the option's kind.
std::string toml_literal(const CLI::Option& option, const std::string& value) {
  return kind_of(option) == OptionKind::text ? toml_string(value) : value;
}

// `text` as "# " comment lines of at most `width` columns.
std::string comment(std::string_view text, std::size_t width = 100) {
  std::string out;
  std::string line = "#";
  std::istringstream words{std::string(text)};
  for (std::string word; words >> word;) {
    if (line.size() + 1 + word.size() > width && line.size() > 1) {
      out += line + "\n";
      line = "#";
    }
    line += " " + word;
  }
  return out + line + "\n";
}

}  // namespace

std::string current_value(CLI::Option& option) {
  option.capture_default_str();  // reads the bound variable
  std::string value = option.get_default_str();
  // A repeatable option (a list) shows as its items joined by commas, which it reads back.
  if (option.get_items_expected_max() > 1) {
    if (value == "{}") return "";
    if (value.size() >= 2 && value.front() == '[' && value.back() == ']') return value.substr(1, value.size() - 2);
  }
  if (kind_of(option) == OptionKind::boolean) {
    if (value == "1") return "true";
    if (value == "0") return "false";
  }
  return value;
}

std::string settings_table(CLI::App& app, const ConfigResolution& resolution) {
  const std::vector<Row> rows = rows_of(app);
  std::vector<std::array<std::string, 4>> cells{{"SECTION", "KEY", "VALUE", "SOURCE"}};
  for (const Row& row : rows) {
    cells.push_back({std::string(row.section), row.key, shown_value(row), source_of(resolution, row.key).describe()});
  }
  std::array<std::size_t, 4> widths{};
  for (const auto& line : cells) {
    for (std::size_t i = 0; i < widths.size(); ++i) widths[i] = std::max(widths[i], line[i].size());
  }
  std::string out;
  if (!resolution.file.empty()) out += std::format("configuration file: {}\n", resolution.file);
  if (!resolution.model_section.empty()) {
    out += std::format("per-model table: [models.\"{}\"]\n", resolution.model_section);
  }
  for (const auto& line : cells) {
    out += std::format("{:<{}}  {:<{}}  {:<{}}  {}\n", line[0], widths[0], line[1], widths[1], line[2], widths[2],
                       line[3]);
  }
  return out;
}

nlohmann::json settings_json(CLI::App& app, const ConfigResolution& resolution) {
  nlohmann::json settings = nlohmann::json::array();
  for (const Row& row : rows_of(app)) {
    const SettingSource source = source_of(resolution, row.key);
    constexpr std::string_view kinds[] = {"flag", "env", "file", "default"};
    nlohmann::json setting{{"section", row.section},
                           {"key", row.key},
                           {"value", shown_value(row)},
                           {"source", kinds[static_cast<int>(source.kind)]},
                           {"flag", "--" + row.key}};
    if (!row.option->get_envname().empty()) setting["env"] = row.option->get_envname();
    if (source.kind == SettingSource::Kind::env) setting["from"] = source.detail;
    if (source.kind == SettingSource::Kind::file) setting["from"] = source.detail;
    settings.push_back(std::move(setting));
  }
  return {{"file", resolution.file}, {"model_section", resolution.model_section}, {"settings", std::move(settings)}};
}

std::string config_template(CLI::App& app) {
  std::string out =
      "# prefixd serve configuration (TOML); load it with `prefixd serve --config FILE` or PREFIXD_CONFIG.\n"
      "# Every setting is written at its built-in default; settings without one are commented out.\n"
      "# Precedence: command-line flag > environment variable > this file > built-in default.\n"
      "# `prefixd config print --config FILE` shows each effective setting and where it came from.\n";
  std::string_view section;
  for (const Row& row : rows_of(app)) {
    if (row.section != section) {
      section = row.section;
      out += std::format("\n[{}]\n", section);
    } else {
      out += "\n";
    }
    out += comment(row.option->get_description());
    std::string names = "--" + row.key;
    if (!row.option->get_envname().empty()) names += ", env " + row.option->get_envname();
    out += "# (" + names + ")\n";
    const std::string value = current_value(*row.option);
    const std::string assignment = std::format("{} = {}\n", row.key, toml_literal(*row.option, value));
    out += value.empty() ? "# " + assignment : assignment;
  }
  out +=
      "\n# Per-model overrides: a [models.\"NAME\"] table applies when the served model's file name or its alias is\n"
      "# NAME, and may set [model] and [cache] keys other than model and alias. For example:\n"
      "#\n"
      "# [models.\"qwen3-8b-q4_k_m.gguf\"]\n"
      "# ctx-size = 32768\n"
      "# prompt-cache-holders = 8\n";
  return out;
}

}  // namespace prefixd::cli
