// `--config` on the real serve options: every option has a key, precedence is flag > environment
// variable > file > default, a refused value names the file's line, and the file `config init`
// writes changes nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "cli/commands.h"
#include "cli/config_keys.h"
#include "cli/config_option.h"
#include "cli/config_render.h"
#include "support/disk_fixtures.h"

namespace prefixd::cli {
namespace {

using testing::TempDir;

// Sets an environment variable for the test's duration.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_.c_str()); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
};

// The serve options and --config on a fresh app, as `prefixd serve` registers them.
class ServeApp {
 public:
  ServeApp() : keep_(add_serve_options(app_)), resolution_(add_config_option(app_)) {}

  void parse(const std::string& args) { app_.parse(args, false); }
  std::string value(const std::string& key) { return current_value(*app_.get_option("--" + key)); }
  std::string source(const std::string& key) const { return resolution_->sources.at(key).describe(); }
  CLI::App& app() { return app_; }
  const ConfigResolution& resolution() const { return *resolution_; }

 private:
  CLI::App app_;
  std::function<int()> keep_;
  std::shared_ptr<const ConfigResolution> resolution_;
};

class ConfigOption : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    const std::string path = (dir_.path() / "prefixd.toml").string();
    std::ofstream(path) << text;
    return path;
  }
  // The ConfigError message parsing `args` throws; empty when it does not throw.
  std::string parse_error(const std::string& args) {
    ServeApp serve;
    try {
      serve.parse(args);
    } catch (const CLI::ConfigError& e) {
      return e.what();
    }
    return {};
  }

  TempDir dir_{"config-option"};
  const std::string model_ = PREFIXD_TINY_MODEL;
};

TEST_F(ConfigOption, EveryServeOptionHasAConfigKeyAndEveryKeyAnOption) {
  CLI::App prefixd;
  add_serve_command(prefixd);
  CLI::App* serve = prefixd.get_subcommand("serve");
  std::set<std::string> options;
  for (CLI::Option* option : setting_options(*serve)) {
    const std::string key = config_key_of(*option);
    EXPECT_TRUE(section_of(key).has_value()) << "--" << key << " has no configuration key in config_keys.cpp";
    options.insert(key);
  }
  EXPECT_GT(options.size(), 40u);
  for (const ConfigKey& key : config_keys()) {
    EXPECT_TRUE(options.contains(std::string(key.key))) << key.key << " names no serve option";
  }
  EXPECT_NE(serve->get_option_no_throw("--config"), nullptr);
}

TEST_F(ConfigOption, EverySettingButTextHasADefaultToWrite) {
  ServeApp serve;
  for (CLI::Option* option : setting_options(serve.app())) {
    if (kind_of(*option) == OptionKind::text) continue;
    EXPECT_FALSE(current_value(*option).empty()) << config_key_of(*option) << " reports no default value";
  }
}

TEST_F(ConfigOption, FileSetsWhatNothingElseSets) {
  const std::string path = write("[model]\nmodel = \"" + model_ + "\"\nalias = \"from-file\"\nctx-size = 4096\n"
                                 "flash-attn = true\n[server]\nport = 9123\nhttp-header-timeout = 2\n");
  ServeApp serve;
  serve.parse("--config " + path);
  EXPECT_EQ(serve.value("alias"), "from-file");
  EXPECT_EQ(serve.value("ctx-size"), "4096");
  EXPECT_EQ(serve.value("port"), "9123");
  EXPECT_EQ(serve.value("flash-attn"), "true");
  EXPECT_EQ(serve.value("http-header-timeout"), "2");
  EXPECT_EQ(serve.source("alias"), path + ":3");
  EXPECT_EQ(serve.source("port"), path + ":7");
  EXPECT_EQ(serve.source("parallel"), "default");
}

TEST_F(ConfigOption, FlagBeatsEnvBeatsFile) {
  const std::string path = write("[model]\nalias = \"from-file\"\nctx-size = 4096\nparallel = 2\n");
  ScopedEnv alias("PREFIXD_ALIAS", "from-env");
  ScopedEnv ctx("PREFIXD_CTX_SIZE", "8192");
  ServeApp serve;
  serve.parse("-m " + model_ + " --config " + path + " --ctx-size 1024");
  EXPECT_EQ(serve.value("ctx-size"), "1024");  // flag over env and file
  EXPECT_EQ(serve.source("ctx-size"), "flag");
  EXPECT_EQ(serve.value("alias"), "from-env");  // env over file
  EXPECT_EQ(serve.source("alias"), "env PREFIXD_ALIAS");
  EXPECT_EQ(serve.value("parallel"), "2");  // file over default
  EXPECT_EQ(serve.source("parallel"), path + ":4");
  EXPECT_EQ(serve.source("model"), "flag");
}

TEST_F(ConfigOption, FileNamedByEnvironmentIsRead) {
  const std::string path = write("[model]\nctx-size = 4096\n");
  ScopedEnv config("PREFIXD_CONFIG", path);
  ServeApp serve;
  serve.parse("-m " + model_);
  EXPECT_EQ(serve.value("ctx-size"), "4096");
  EXPECT_EQ(serve.resolution().file, path);
}

TEST_F(ConfigOption, WrongTypeNamesKeyAndLine) {
  const std::string path = write("[server]\nhost = \"127.0.0.1\"\nport = \"8080\"\n");
  const std::string error = parse_error("-m " + model_ + " --config " + path);
  EXPECT_NE(error.find(path + ":3"), std::string::npos) << error;
  EXPECT_NE(error.find("port"), std::string::npos) << error;
  EXPECT_NE(error.find("expected an integer"), std::string::npos) << error;
}

TEST_F(ConfigOption, ValueTheOptionRefusesNamesKeyAndLine) {
  std::string path = write("[server]\n\nport = 70000\n");
  std::string error = parse_error("-m " + model_ + " --config " + path);
  EXPECT_NE(error.find(path + ":3"), std::string::npos) << error;
  EXPECT_NE(error.find("port"), std::string::npos) << error;

  path = write("[cache]\ncache-isolation = \"everyone\"\n");
  error = parse_error("-m " + model_ + " --config " + path);
  EXPECT_NE(error.find(path + ":2"), std::string::npos) << error;
  EXPECT_NE(error.find("cache-isolation"), std::string::npos) << error;

  path = write("[disk]\ncache-disk-max-bytes = -5\n");
  error = parse_error("-m " + model_ + " --config " + path);
  EXPECT_NE(error.find(path + ":2"), std::string::npos) << error;

  path = write("[model]\nmodel = \"/nonexistent.gguf\"\n");
  error = parse_error("--config " + path);
  EXPECT_NE(error.find(path + ":2"), std::string::npos) << error;
}

TEST_F(ConfigOption, UnknownKeyAndMissingFileAreConfigErrors) {
  const std::string path = write("[server]\nprot = 1\n");
  const std::string error = parse_error("-m " + model_ + " --config " + path);
  EXPECT_NE(error.find(path + ":2"), std::string::npos) << error;
  EXPECT_NE(error.find("prot"), std::string::npos) << error;
  EXPECT_NE(parse_error("-m " + model_ + " --config /nonexistent/prefixd.toml"), "");
}

TEST_F(ConfigOption, PerModelTableFollowsTheServedFileAndAlias) {
  const std::string name = std::filesystem::path(model_).filename().string();
  const std::string path = write("[model]\nctx-size = 4096\n[models.\"" + name + "\"]\nctx-size = 2048\n"
                                 "[models.\"chat\"]\nparallel = 7\n[models.\"other.gguf\"]\nparallel = 9\n");
  ServeApp by_file;
  by_file.parse("-m " + model_ + " --config " + path);
  EXPECT_EQ(by_file.value("ctx-size"), "2048");
  EXPECT_EQ(by_file.source("ctx-size"), path + ":4");
  EXPECT_EQ(by_file.value("parallel"), "4");
  EXPECT_EQ(by_file.resolution().model_section, name);

  const std::string aliased = write("[model]\nctx-size = 4096\nalias = \"chat\"\n[models.\"chat\"]\nparallel = 7\n");
  ServeApp by_alias;
  by_alias.parse("-m " + model_ + " --config " + aliased);
  EXPECT_EQ(by_alias.value("parallel"), "7");
  EXPECT_EQ(by_alias.value("ctx-size"), "4096");
}

TEST_F(ConfigOption, InitTemplateLoadsAndChangesNothing) {
  ServeApp defaults;
  const std::string path = write(config_template(defaults.app()));
  ServeApp plain;
  plain.parse("-m " + model_);
  ServeApp loaded;
  loaded.parse("-m " + model_ + " --config " + path);
  int from_file = 0;
  for (CLI::Option* option : setting_options(plain.app())) {
    const std::string key = config_key_of(*option);
    EXPECT_EQ(loaded.value(key), plain.value(key)) << key;
    if (loaded.source(key).starts_with(path)) ++from_file;
  }
  EXPECT_GT(from_file, 40);  // the file really set them
}

}  // namespace
}  // namespace prefixd::cli
