#include "cli/config_file.h"

#include <algorithm>
#include <format>
#include <fstream>
#include <iterator>

#include <toml++/toml.hpp>

namespace prefixd::cli {
namespace {

std::uint32_t line_of(const toml::key& key) { return key.source().begin.line; }

// The TOML types a setting cannot take.
std::string_view structured_type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    default: return "value of this type";
  }
}

// Levenshtein distance, for suggesting the key a typo meant.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t replaced = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, replaced});
    }
  }
  return row[b.size()];
}

// " (did you mean 'port'?)" when a known key is within two edits of `key`; else empty.
std::string suggestion(std::string_view key) {
  std::string_view best;
  std::size_t best_distance = 3;
  for (const ConfigKey& known : config_keys()) {
    const std::size_t distance = edit_distance(key, known.key);
    if (distance < best_distance) {
      best = known.key;
      best_distance = distance;
    }
  }
  return best.empty() ? std::string() : std::format(" (did you mean '{}'?)", best);
}

std::string quoted(std::string_view name) { return std::format("\"{}\"", name); }

// One file's reading: every error names the file and a line.
class Reader {
 public:
  explicit Reader(std::string path) { file_.path = std::move(path); }

  std::expected<ConfigFile, std::string> read(std::string_view text) {
    toml::table root;
    try {
      root = toml::parse(text, file_.path);
    } catch (const toml::parse_error& e) {
      return std::unexpected(std::format("{}:{}:{}: TOML syntax error: {}", file_.path, e.source().begin.line,
                                         e.source().begin.column, e.description()));
    }
    for (auto&& [name, node] : root) {
      if (name.str() == "models") {
        if (auto error = read_models(name, node)) return std::unexpected(*error);
        continue;
      }
      const auto section = parse_section_name(name.str());
      if (!section) return std::unexpected(unknown_top_level(name, node));
      if (!node.is_table()) {
        return std::unexpected(at(line_of(name), std::format("[{}] must be a table, not a single value", name.str())));
      }
      const std::string table = std::format("[{}]", name.str());
      for (auto&& [key, value] : *node.as_table()) {
        const auto belongs = section_of(key.str());
        if (belongs != section) return std::unexpected(unknown_key(table, key, belongs));
        auto entry = entry_for(table, key, value, *section);
        if (!entry) return std::unexpected(entry.error());
        file_.entries.push_back(std::move(*entry));
      }
    }
    return std::move(file_);
  }

 private:
  std::string at(std::uint32_t line, std::string_view what) const {
    return std::format("{}:{}: {}", file_.path, line, what);
  }

  std::string unknown_top_level(const toml::key& name, const toml::node& node) const {
    if (!node.is_table()) {
      if (const auto section = section_of(name.str())) {
        return at(line_of(name), std::format("key '{}' must be inside a section: put it under [{}]", name.str(),
                                             section_name(*section)));
      }
      return at(line_of(name), std::format("unknown key '{}' (and keys belong inside a section: [server], [model], "
                                           "[cache], [disk])",
                                           name.str()));
    }
    return at(line_of(name), std::format("unknown section [{}]: the sections are [server], [model], [cache], [disk] "
                                         "and [models.\"NAME\"]",
                                         name.str()));
  }

  std::string unknown_key(std::string_view table, const toml::key& key, std::optional<ConfigSection> belongs) const {
    if (belongs) {
      return at(line_of(key), std::format("key '{}' does not belong in {}: it belongs in [{}]", key.str(), table,
                                          section_name(*belongs)));
    }
    return at(line_of(key), std::format("unknown key '{}' in {}{}", key.str(), table, suggestion(key.str())));
  }

  std::expected<ConfigEntry, std::string> entry_for(std::string_view table, const toml::key& key,
                                                    const toml::node& node, ConfigSection section) const {
    ConfigEntry entry{.key = std::string(key.str()), .section = section, .table = std::string(table),
                      .line = line_of(key)};
    switch (node.type()) {
      case toml::node_type::integer: entry.value = node.as_integer()->get(); break;
      case toml::node_type::floating_point: entry.value = node.as_floating_point()->get(); break;
      case toml::node_type::boolean: entry.value = node.as_boolean()->get(); break;
      case toml::node_type::string: entry.value = node.as_string()->get(); break;
      default:
        return std::unexpected(at(line_of(key), std::format("{} {}: a {} is not a setting's value (use a string, an "
                                                            "integer, a float or true/false)",
                                                            table, key.str(), structured_type_name(node.type()))));
    }
    return entry;
  }

  // [models."NAME"] tables: each holds [model] and [cache] keys for one model.
  std::optional<std::string> read_models(const toml::key& name, const toml::node& node) {
    if (!node.is_table()) return at(line_of(name), "models must hold tables: [models.\"FILE NAME OR ALIAS\"]");
    for (auto&& [model_name, model_node] : *node.as_table()) {
      const std::string table = std::format("[models.{}]", quoted(model_name.str()));
      if (!model_node.is_table()) {
        return at(line_of(model_name), std::format("models.{} must be a table: write it as {}",
                                                   quoted(model_name.str()), table));
      }
      ModelOverride model{.name = std::string(model_name.str()), .line = line_of(model_name)};
      for (auto&& [key, value] : *model_node.as_table()) {
        if (!overridable_per_model(key.str())) {
          const auto belongs = section_of(key.str());
          if (!belongs) return unknown_key(table, key, belongs);
          return at(line_of(key), std::format("key '{}' cannot be set per model in {}: only [model] and [cache] keys "
                                              "other than model and alias can",
                                              key.str(), table));
        }
        auto entry = entry_for(table, key, value, *section_of(key.str()));
        if (!entry) return entry.error();
        model.entries.push_back(std::move(*entry));
      }
      file_.models.push_back(std::move(model));
    }
    return std::nullopt;
  }

  ConfigFile file_;
};

}  // namespace

const ConfigEntry* ConfigFile::find(std::string_view key) const {
  const auto entry = std::ranges::find(entries, key, &ConfigEntry::key);
  return entry == entries.end() ? nullptr : &*entry;
}

std::expected<ConfigFile::ModelSettings, std::string> ConfigFile::settings_for(std::string_view model_file_name,
                                                                               std::string_view alias) const {
  const ModelOverride* chosen = nullptr;
  for (const ModelOverride& model : models) {
    if (model.name != model_file_name && (alias.empty() || model.name != alias)) continue;
    if (chosen != nullptr) {
      return std::unexpected(std::format("{}:{}: [models.{}] and [models.{}] (line {}) both match the served model "
                                         "(file {}, alias {}): keep one",
                                         path, model.line, quoted(model.name), quoted(chosen->name), chosen->line,
                                         quoted(model_file_name), quoted(alias)));
    }
    chosen = &model;
  }
  ModelSettings settings{.entries = entries, .model = {}};
  if (chosen == nullptr) return settings;
  settings.model = chosen->name;
  for (const ConfigEntry& override_entry : chosen->entries) {
    const auto base = std::ranges::find(settings.entries, override_entry.key, &ConfigEntry::key);
    if (base != settings.entries.end()) {
      *base = override_entry;
    } else {
      settings.entries.push_back(override_entry);
    }
  }
  return settings;
}

std::expected<ConfigFile, std::string> parse_config_text(std::string_view text, const std::string& path) {
  return Reader(path).read(text);
}

std::expected<ConfigFile, std::string> read_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::unexpected(std::format("{}: cannot read the configuration file", path));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return parse_config_text(text, path);
}

std::string value_text(const ConfigValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else {
          return std::format("{}", v);
        }
      },
      value);
}

std::string_view value_type_name(const ConfigValue& value) {
  constexpr std::string_view names[] = {"an integer", "a float", "a boolean", "a string"};
  return names[value.index()];
}

}  // namespace prefixd::cli
