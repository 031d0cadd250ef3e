// The serve configuration file's reader: sections and keys come from the one table, every error
// names the file and the line, and [models."NAME"] tables replace base settings only for the model
// they name.
#include <gtest/gtest.h>

#include "cli/config_file.h"
#include "cli/config_keys.h"

namespace prefixd::cli {
namespace {

std::string error_of(std::string_view text) {
  auto parsed = parse_config_text(text, "prefixd.toml");
  EXPECT_FALSE(parsed.has_value()) << text;
  return parsed ? std::string() : parsed.error();
}

TEST(ConfigKeys, EveryKeyHasExactlyOneSection) {
  std::set<std::string_view> seen;
  for (const ConfigKey& key : config_keys()) {
    EXPECT_TRUE(seen.insert(key.key).second) << key.key << " appears twice";
    EXPECT_EQ(section_of(key.key), key.section) << key.key;
  }
  EXPECT_EQ(section_of("http-header-timeout"), ConfigSection::server);
  EXPECT_EQ(section_of("ctx-size"), ConfigSection::model);
  EXPECT_EQ(section_of("cache-disk-path"), ConfigSection::disk);
  EXPECT_EQ(section_of("prompt-cache-holders"), ConfigSection::cache);
  EXPECT_FALSE(section_of("config").has_value());
}

TEST(ConfigFile, ReadsTypedValuesWithTheirLines) {
  auto parsed = parse_config_text("[server]\nport = 9000\nhost = \"0.0.0.0\"\n\n[model]\nflash-attn = true\n"
                                  "[server.ignored-never]\n",
                                  "x.toml");
  // A sub-table is not a value: rejected with its line.
  ASSERT_FALSE(parsed.has_value());
  EXPECT_NE(parsed.error().find("x.toml:7"), std::string::npos) << parsed.error();

  parsed = parse_config_text("[server]\nport = 9000\nhttp-header-timeout = 2.5\n\n[model]\nflash-attn = true\n"
                             "alias = \"a\"\n",
                             "x.toml");
  ASSERT_TRUE(parsed.has_value()) << parsed.error();
  ASSERT_EQ(parsed->entries.size(), 4u);
  const ConfigEntry* port = parsed->find("port");
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(std::get<std::int64_t>(port->value), 9000);
  EXPECT_EQ(port->line, 2u);
  EXPECT_EQ(port->table, "[server]");
  EXPECT_EQ(value_text(parsed->find("http-header-timeout")->value), "2.5");
  EXPECT_EQ(value_text(parsed->find("flash-attn")->value), "true");
  EXPECT_EQ(parsed->find("alias")->line, 7u);
}

TEST(ConfigFile, SyntaxErrorNamesTheLine) {
  const std::string error = error_of("[server]\nport = 9000\nhost = \n");
  EXPECT_NE(error.find("prefixd.toml:3:"), std::string::npos) << error;
  EXPECT_NE(error.find("syntax"), std::string::npos) << error;
}

TEST(ConfigFile, UnknownSectionNamesItAndTheLine) {
  const std::string error = error_of("[server]\nport = 1\n\n[sever]\nhost = \"x\"\n");
  EXPECT_NE(error.find("prefixd.toml:4:"), std::string::npos) << error;
  EXPECT_NE(error.find("[sever]"), std::string::npos) << error;
}

TEST(ConfigFile, UnknownKeyNamesItAndTheLine) {
  const std::string error = error_of("[server]\nport = 1\nprot = 2\n");
  EXPECT_NE(error.find("prefixd.toml:3:"), std::string::npos) << error;
  EXPECT_NE(error.find("'prot'"), std::string::npos) << error;
  EXPECT_NE(error.find("did you mean 'port'"), std::string::npos) << error;
}

TEST(ConfigFile, KeyInTheWrongSectionSaysWhereItBelongs) {
  const std::string error = error_of("[server]\nctx-size = 4096\n");
  EXPECT_NE(error.find("prefixd.toml:2:"), std::string::npos) << error;
  EXPECT_NE(error.find("[model]"), std::string::npos) << error;
}

TEST(ConfigFile, KeyOutsideAnySectionIsRefused) {
  const std::string error = error_of("port = 8080\n");
  EXPECT_NE(error.find("prefixd.toml:1:"), std::string::npos) << error;
  EXPECT_NE(error.find("[server]"), std::string::npos) << error;
}

TEST(ConfigFile, ArrayValueIsRefused) {
  const std::string error = error_of("[server]\n\nhost = [\"a\", \"b\"]\n");
  EXPECT_NE(error.find("prefixd.toml:3:"), std::string::npos) << error;
  EXPECT_NE(error.find("array"), std::string::npos) << error;
}

TEST(ConfigFile, PerModelTableTakesOnlyModelAndCacheKeys) {
  std::string error = error_of("[models.\"a.gguf\"]\nctx-size = 1\nport = 2\n");
  EXPECT_NE(error.find("prefixd.toml:3:"), std::string::npos) << error;
  EXPECT_NE(error.find("'port'"), std::string::npos) << error;
  error = error_of("[models.\"a.gguf\"]\nmodel = \"b.gguf\"\n");
  EXPECT_NE(error.find("prefixd.toml:2:"), std::string::npos) << error;
  error = error_of("[models.\"a.gguf\"]\nctx-sise = 1\n");
  EXPECT_NE(error.find("'ctx-sise'"), std::string::npos) << error;
}

constexpr std::string_view kTwoModels =
    "[model]\nctx-size = 4096\nparallel = 2\n\n"
    "[cache]\nprompt-cache-holders = 4\n\n"
    "[models.\"big.gguf\"]\nctx-size = 32768\nprompt-cache-holders = 8\n\n"
    "[models.\"chat\"]\nparallel = 6\n";

TEST(ConfigFile, PerModelTableReplacesBaseSettingsOnlyForItsModel) {
  auto parsed = parse_config_text(kTwoModels, "m.toml");
  ASSERT_TRUE(parsed.has_value()) << parsed.error();
  auto value = [](const ConfigFile::ModelSettings& s, std::string_view key) {
    const auto e = std::ranges::find(s.entries, key, &ConfigEntry::key);
    return e == s.entries.end() ? std::string("-") : value_text(e->value) + "@" + std::to_string(e->line);
  };
  auto other = parsed->settings_for("small.gguf", "");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->model, "");
  EXPECT_EQ(value(*other, "ctx-size"), "4096@2");
  EXPECT_EQ(value(*other, "prompt-cache-holders"), "4@6");

  auto big = parsed->settings_for("big.gguf", "");
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->model, "big.gguf");
  EXPECT_EQ(value(*big, "ctx-size"), "32768@9");
  EXPECT_EQ(value(*big, "prompt-cache-holders"), "8@10");
  EXPECT_EQ(value(*big, "parallel"), "2@3");

  auto by_alias = parsed->settings_for("small.gguf", "chat");
  ASSERT_TRUE(by_alias.has_value());
  EXPECT_EQ(by_alias->model, "chat");
  EXPECT_EQ(value(*by_alias, "parallel"), "6@13");
  EXPECT_EQ(value(*by_alias, "ctx-size"), "4096@2");
}

TEST(ConfigFile, TwoMatchingModelTablesAreAnError) {
  auto parsed = parse_config_text(kTwoModels, "m.toml");
  ASSERT_TRUE(parsed.has_value());
  auto both = parsed->settings_for("big.gguf", "chat");
  ASSERT_FALSE(both.has_value());
  EXPECT_NE(both.error().find("m.toml:"), std::string::npos) << both.error();
  EXPECT_NE(both.error().find("big.gguf"), std::string::npos) << both.error();
}

TEST(ConfigFile, MissingFileIsAnError) {
  auto read = read_config_file("/nonexistent/prefixd.toml");
  ASSERT_FALSE(read.has_value());
  EXPECT_NE(read.error().find("/nonexistent/prefixd.toml"), std::string::npos);
}

}  // namespace
}  // namespace prefixd::cli
