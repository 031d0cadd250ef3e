// `prefixd serve --config FILE` and `prefixd config print|init` as the binary runs them: the file's
// port and alias are honoured, an environment variable beats the file and a flag beats both, an
// unknown key stops the server before it loads the model, `config init` writes a file that loads
// and changes nothing, and `config print` says where each setting came from.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <fstream>

#include "server_process.h"
#include "support/disk_fixtures.h"

namespace prefixd::testing {
namespace {

// Runs `prefixd ARGS` with only `env` (NAME=VALUE words) in its environment; stdout, plus stderr
// unless `stdout_only`.
CommandResult prefixd(const std::string& args, const std::string& env = "", bool stdout_only = false) {
  return run_shell("env -i PATH=/usr/bin:/bin HOME=/tmp PREFIXD_MODEL_FINGERPRINT_CACHE=off " + env + " " + PREFIXD_BINARY + " " +
                   args + (stdout_only ? " 2>/dev/null" : " 2>&1"));
}

std::string served_model_id(const ServerProcess& server) {
  auto client = server.client();
  const JsonReply models = get_json(*client, "/v1/models");
  if (models.status != 200 || !models.body.contains("data") || models.body["data"].empty()) return "?";
  return models.body["data"][0].value("id", "?");
}

class ConfigFile : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_.path() / name).string();
    std::ofstream(path) << text;
    return path;
  }

  TempDir dir_{"config-file"};
};

TEST_F(ConfigFile, FileSetsPortModelAndAlias) {
  const int port = pick_free_port();
  const std::string path = write("prefixd.toml", "[server]\nhost = \"127.0.0.1\"\nport = " + std::to_string(port) +
                                                     "\n\n[model]\nmodel = \"" + PREFIXD_TINY_MODEL +
                                                     "\"\nalias = \"from-file\"\nctx-size = 2048\n");
  bench::ServerLaunch launch;
  launch.binary = PREFIXD_BINARY;
  launch.args = {"serve", "--config", path};
  launch.log_path = (dir_.path() / "server.log").string();
  launch.startup_limit = std::chrono::seconds(60);
  // The default disk tier goes to the test's own directory, not the user's cache.
  launch.extra_env = {{"PREFIXD_MODEL_FINGERPRINT_CACHE", "off"}, {"XDG_CACHE_HOME", dir_.path().string()}};
  bench::ServerProcess server(std::move(launch), port);  // waits for /health on the file's port
  httplib::Client client("127.0.0.1", port);
  const JsonReply models = get_json(client, "/v1/models");
  ASSERT_EQ(models.status, 200) << models.raw;
  EXPECT_EQ(models.body["data"][0]["id"], "from-file");
}

TEST_F(ConfigFile, EnvironmentBeatsFileAndFlagBeatsBoth) {
  const std::string path = write("prefixd.toml", "[model]\nalias = \"from-file\"\n");
  {
    ServerProcess server({.extra_args = {"--config", path}, .env = {{"PREFIXD_ALIAS", "from-env"}}});
    EXPECT_EQ(served_model_id(server), "from-env");
  }
  {
    ServerProcess server(
        {.extra_args = {"--config", path, "--alias", "from-flag"}, .env = {{"PREFIXD_ALIAS", "from-env"}}});
    EXPECT_EQ(served_model_id(server), "from-flag");
  }
  ServerProcess server({.extra_args = {}, .env = {{"PREFIXD_CONFIG", path}}});
  EXPECT_EQ(served_model_id(server), "from-file");
}

TEST_F(ConfigFile, UnknownKeyExitsNonZeroNamingKeyAndLine) {
  const std::string path = write("bad.toml", "[server]\nhost = \"127.0.0.1\"\nprot = 8080\n");
  const CommandResult run = prefixd("serve --model " + std::string(PREFIXD_TINY_MODEL) + " --config " + path);
  EXPECT_NE(run.status, 0) << run.output;
  EXPECT_NE(run.output.find(path + ":3"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("'prot'"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("llama"), std::string::npos) << "the model must not be loaded: " << run.output;

  const std::string typed = write("typed.toml", "[model]\nctx-size = \"big\"\n");
  const CommandResult wrong = prefixd("serve --model " + std::string(PREFIXD_TINY_MODEL) + " --config " + typed);
  EXPECT_NE(wrong.status, 0) << wrong.output;
  EXPECT_NE(wrong.output.find(typed + ":2"), std::string::npos) << wrong.output;
  EXPECT_NE(wrong.output.find("ctx-size"), std::string::npos) << wrong.output;
}

// libllama needs a batch row per sequence; a smaller batch is refused with the size to use instead
// of aborting inside libllama.
TEST_F(ConfigFile, ABatchSmallerThanTheSequencesIsRefusedNamingTheMinimum) {
  const CommandResult run = prefixd("serve --model " + std::string(PREFIXD_TINY_MODEL) +
                                    " --parallel 2 --ctx-size 1024 --batch-size 4 --port 1");
  EXPECT_NE(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("--batch-size 4 is smaller than"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("use at least"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("GGML_ASSERT"), std::string::npos) << run.output;
}

// --deterministic with layers on a GPU (lavapipe here) pads every call in a KV stream per sequence:
// a model with a recurrent state, or --kv-unified, is refused at startup, naming the way out.
TEST_F(ConfigFile, DeterministicWithLayersOnAGpuServesAttentionModelsInStreamsOnly) {
  const char* no_gpu = std::getenv("PREFIXD_TEST_NO_GPU");
  if (no_gpu != nullptr && std::string(no_gpu) == "1") GTEST_SKIP() << "PREFIXD_TEST_NO_GPU=1";
  const CommandResult hybrid = prefixd("serve --model " + std::string(PREFIXD_TEST_MODELS_DIR) +
                                           "/qwen35-tiny.gguf --deterministic --gpu-layers 99 --ctx-size 1024 --port 1",
                                       "GGML_VK_VISIBLE_DEVICES=0");
  EXPECT_NE(hybrid.status, 0) << hybrid.output;
  EXPECT_NE(hybrid.output.find("serves dense and sliding-window models only"), std::string::npos) << hybrid.output;
  EXPECT_NE(hybrid.output.find("--gpu-layers 0"), std::string::npos) << hybrid.output;
  const CommandResult pool = prefixd("serve --model " + std::string(PREFIXD_TINY_MODEL) +
                                         " --deterministic --kv-unified --gpu-layers 99 --ctx-size 1024 --port 1",
                                     "GGML_VK_VISIBLE_DEVICES=0");
  EXPECT_NE(pool.status, 0) << pool.output;
  EXPECT_NE(pool.output.find("drop --kv-unified"), std::string::npos) << pool.output;
}

// A draft floor above its ceiling could never draft; both flags are named.
TEST_F(ConfigFile, ADraftMinimumAboveTheMaximumIsRefused) {
  const CommandResult run =
      prefixd("serve --model " + std::string(PREFIXD_TINY_MODEL) + " --spec-type ngram --draft-min 8 --draft-max 4 --port 1");
  EXPECT_NE(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("--draft-min (8) must not exceed --draft-max (4)"), std::string::npos) << run.output;
  const CommandResult bad_type = prefixd("serve --model " + std::string(PREFIXD_TINY_MODEL) + " --spec-type eagle --port 1");
  EXPECT_NE(bad_type.status, 0) << bad_type.output;
  EXPECT_NE(bad_type.output.find("--spec-type"), std::string::npos) << bad_type.output;
}

// A draft model must read token ids as the model does, and be cut back like an attention model;
// --spec-type must agree with --model-draft.
TEST_F(ConfigFile, ADraftModelOfAnotherVocabularyOrFamilyIsRefused) {
  const std::string models = PREFIXD_TEST_MODELS_DIR;
  const std::string serve = "serve --model " + std::string(PREFIXD_TINY_MODEL) + " --port 1 ";
  const CommandResult other = prefixd(serve + "--model-draft " + models + "/archs/gemma2-dense.gguf");
  EXPECT_NE(other.status, 0) << other.output;
  EXPECT_NE(other.output.find("its vocabulary is not the model's: "), std::string::npos) << other.output;
  const CommandResult recurrent = prefixd(serve + "--model-draft " + models + "/mamba2-tiny.gguf");
  EXPECT_NE(recurrent.status, 0) << recurrent.output;
  EXPECT_NE(recurrent.output.find("the draft model must be a dense attention model"), std::string::npos) << recurrent.output;
  const CommandResult no_model = prefixd(serve + "--spec-type model");
  EXPECT_NE(no_model.status, 0) << no_model.output;
  EXPECT_NE(no_model.output.find("--spec-type model needs --model-draft FILE"), std::string::npos) << no_model.output;
  const CommandResult both = prefixd(serve + "--spec-type ngram --model-draft " + models + "/tiny-first-block.gguf");
  EXPECT_NE(both.status, 0) << both.output;
  EXPECT_NE(both.output.find("drop --spec-type ngram"), std::string::npos) << both.output;
}

// A keep-alive interval of zero would flood every stream; the flag names its range.
TEST_F(ConfigFile, AStreamKeepAliveOutsideItsRangeIsRefused) {
  const CommandResult run = prefixd("serve --model " + std::string(PREFIXD_TINY_MODEL) + " --stream-keepalive 0 --port 1");
  EXPECT_NE(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("--stream-keepalive"), std::string::npos) << run.output;
}

TEST_F(ConfigFile, InitOutputLoadsAndChangesNothing) {
  const std::string path = (dir_.path() / "init.toml").string();
  const CommandResult init = prefixd("config init " + path);
  ASSERT_EQ(init.status, 0) << init.output;
  const CommandResult again = prefixd("config init " + path);
  EXPECT_NE(again.status, 0) << "overwrote without --force";
  EXPECT_NE(again.output.find("--force"), std::string::npos) << again.output;
  EXPECT_EQ(prefixd("config init --force " + path).status, 0);
  EXPECT_EQ(prefixd("config init", "", true).output, [&] {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }());

  const CommandResult plain = prefixd("config print --json", "", true);
  const CommandResult loaded = prefixd("config print --json --config " + path, "", true);
  ASSERT_EQ(plain.status, 0) << plain.output;
  ASSERT_EQ(loaded.status, 0) << loaded.output;
  const auto before = nlohmann::json::parse(plain.output)["settings"];
  const auto after = nlohmann::json::parse(loaded.output)["settings"];
  ASSERT_EQ(before.size(), after.size());
  int from_file = 0;
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i]["value"], before[i]["value"]) << before[i]["key"];
    if (after[i]["source"] == "file") ++from_file;
  }
  EXPECT_GT(from_file, 40);

  ServerProcess server({.extra_args = {"--config", path}});  // and a server starts with it
  EXPECT_EQ(served_model_id(server), std::filesystem::path(PREFIXD_TINY_MODEL).stem().string());
}

TEST_F(ConfigFile, PrintShowsEachSettingsSource) {
  const std::string path = write("prefixd.toml", "[model]\nctx-size = 4096\nparallel = 2\n\n[server]\nport = 9555\n");
  const CommandResult run =
      prefixd("config print --config " + path + " --batch-size 64 --port 9000", "PREFIXD_PARALLEL=3", true);
  ASSERT_EQ(run.status, 0) << run.output;
  auto row = [&](const std::string& key) {
    const std::size_t at = run.output.find(" " + key + " ");
    if (at == std::string::npos) return std::string();
    const std::size_t end = run.output.find('\n', at);
    return run.output.substr(at, end - at);
  };
  EXPECT_NE(row("ctx-size").find("4096"), std::string::npos) << run.output;
  EXPECT_NE(row("ctx-size").find(path + ":2"), std::string::npos) << run.output;
  EXPECT_NE(row("parallel").find("env PREFIXD_PARALLEL"), std::string::npos) << run.output;
  EXPECT_NE(row("parallel").find(" 3 "), std::string::npos) << run.output;
  EXPECT_NE(row("batch-size").find("flag"), std::string::npos) << run.output;
  EXPECT_NE(row("port").find("9000"), std::string::npos) << run.output;
  EXPECT_NE(row("port").find("flag"), std::string::npos) << run.output;
  EXPECT_NE(row("threads").find("default"), std::string::npos) << run.output;

  const CommandResult json = prefixd("config print --json --config " + path, "PREFIXD_PARALLEL=3", true);
  ASSERT_EQ(json.status, 0) << json.output;
  const auto settings = nlohmann::json::parse(json.output)["settings"];
  for (const auto& setting : settings) {
    if (setting["key"] == "ctx-size") {
      EXPECT_EQ(setting["from"], path + ":2");
    }
    if (setting["key"] == "parallel") {
      EXPECT_EQ(setting["source"], "env");
    }
  }
}

}  // namespace
}  // namespace prefixd::testing
