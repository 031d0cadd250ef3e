// Models by name (hub/hub_model.h) against a local hub that serves the Hugging Face hub's documented
// routes from test files: `prefixd pull` fills the Hugging Face cache layout and finds it again,
// resumes a partial download, refuses bytes whose SHA-256 is not the published one, and says
// clearly what is missing; `prefixd serve --hf-repo` serves the model and its vision projector.
#include <gtest/gtest.h>

#include <openssl/evp.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <format>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char out[32];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), out, &n, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) hex += std::format("{:02x}", out[i]);
  return hex;
}

constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";

// A hub on a loopback port: repositories of files, each listed with its LFS SHA-256 (or a wrong one),
// files behind a redirect to a "CDN" path that honours Range; a gated repository wants a token.
class LocalHub {
 public:
  struct File {
    std::string bytes;
    std::string published_sha256;  // what the listing says
  };
  LocalHub() {
    const std::string tiny = read_file(PREFIXD_TINY_MODEL);
    const std::string projector = read_file(fs::path(PREFIXD_TEST_MODELS_DIR) / "tiny-mmproj.gguf");
    repos_["test/tiny-GGUF"] = {{"tiny-Q4_K_M.gguf", {tiny, sha256_hex(tiny)}},
                                {"tiny-Q8_0.gguf", {tiny + std::string(64, '\0'), sha256_hex(tiny + std::string(64, '\0'))}},
                                {"mmproj-tiny-f16.gguf", {projector, sha256_hex(projector)}},
                                {"README.md", {"# tiny\n", ""}}};
    repos_["test/bad-GGUF"] = {{"bad-Q4_K_M.gguf", {tiny, std::string(64, 'a')}}};
    repos_["test/gated-GGUF"] = {{"gated-Q4_K_M.gguf", {tiny, sha256_hex(tiny)}}};
    server_.Get(R"(/api/models/([^/]+)/([^/]+)/revision/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string repo = req.matches[1].str() + "/" + req.matches[2].str();
      if (!authorized(repo, req, res)) return;
      const auto it = repos_.find(repo);
      if (it == repos_.end() || req.matches[3] != "main") {
        res.status = 404;
        res.set_content(R"({"error":"Repository not found"})", "application/json");
        return;
      }
      json siblings = json::array();
      for (const auto& [name, file] : it->second) {
        json s = {{"rfilename", name}, {"size", file.bytes.size()}};
        if (file.published_sha256.empty()) {
          s["blobId"] = "1111111111111111111111111111111111111111";
        } else {
          s["lfs"] = {{"sha256", file.published_sha256}, {"size", file.bytes.size()}, {"pointerSize", 134}};
        }
        siblings.push_back(s);
      }
      res.set_content(json{{"id", repo}, {"sha", kCommit}, {"siblings", siblings}}.dump(), "application/json");
    });
    server_.Get(R"(/([^/]+)/([^/]+)/resolve/([^/]+)/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string repo = req.matches[1].str() + "/" + req.matches[2].str();
      if (!authorized(repo, req, res)) return;
      res.status = 302;
      res.set_header("Location", "/cdn/" + repo + "/" + req.matches[4].str());
    });
    server_.Get(R"(/cdn/([^/]+)/([^/]+)/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      const auto repo = repos_.find(req.matches[1].str() + "/" + req.matches[2].str());
      const auto file = repo == repos_.end() ? decltype(repo->second.end()){} : repo->second.find(req.matches[3].str());
      if (repo == repos_.end() || file == repo->second.end()) {
        res.status = 404;
        return;
      }
      std::size_t from = 0;
      if (req.has_header("Range")) {
        from = std::stoull(req.get_header_value("Range").substr(6));
        std::lock_guard lock(mutex_);
        ranges_.push_back(from);
      }
      const std::string& bytes = file->second.bytes;
      {
        std::lock_guard lock(mutex_);
        served_ += bytes.size() - std::min(from, bytes.size());
      }
      // The whole file: the server answers a Range with 206 and the part asked for.
      res.set_content(bytes, "application/octet-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    server_.wait_until_ready();
  }
  ~LocalHub() {
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::size_t served() {
    std::lock_guard lock(mutex_);
    return served_;
  }
  std::vector<std::size_t> ranges() {
    std::lock_guard lock(mutex_);
    return ranges_;
  }
  const File& file(const std::string& repo, const std::string& name) { return repos_.at(repo).at(name); }

 private:
  bool authorized(const std::string& repo, const httplib::Request& req, httplib::Response& res) const {
    if (repo != "test/gated-GGUF" || req.get_header_value("Authorization") == "Bearer secret") return true;
    res.status = 401;
    return false;
  }
  std::map<std::string, std::map<std::string, File>> repos_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::size_t served_ = 0;
  std::vector<std::size_t> ranges_;
};

struct TempDir {
  TempDir() {
    std::string name = "/tmp/prefixd-hub-test-XXXXXX";
    if (::mkdtemp(name.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

struct Pulled {
  int status = -1;
  std::string output;
};

Pulled run_pull(const std::string& endpoint, const fs::path& cache, const std::string& args, const std::string& env = "") {
  const std::string command = std::format("env HF_ENDPOINT={} HF_HUB_CACHE={} {} {} pull {} 2>&1", endpoint,
                                          cache.string(), env, PREFIXD_BINARY, args);
  Pulled out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out.output += buffer;
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

Pulled pull(const LocalHub& hub, const fs::path& cache, const std::string& args, const std::string& env = "") {
  return run_pull(hub.endpoint(), cache, args, env);
}

// The address of a hub that is not there.
std::string nowhere() { return "http://127.0.0.1:" + std::to_string(pick_free_port()); }

TEST(Hub, PullFillsTheHubCacheLayoutAndFindsItAgain) {
  LocalHub hub;
  TempDir cache;
  const Pulled first = pull(hub, cache.path, "test/tiny-GGUF:Q8_0");
  ASSERT_EQ(first.status, 0) << first.output;
  const fs::path repo = cache.path / "models--test--tiny-GGUF";
  const fs::path model = repo / "snapshots" / kCommit / "tiny-Q8_0.gguf";
  const fs::path projector = repo / "snapshots" / kCommit / "mmproj-tiny-f16.gguf";
  EXPECT_NE(first.output.find("model: " + model.string()), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("mmproj: " + projector.string()), std::string::npos) << first.output;
  const auto& q8 = hub.file("test/tiny-GGUF", "tiny-Q8_0.gguf");
  ASSERT_TRUE(fs::is_symlink(model));
  EXPECT_EQ(fs::read_symlink(model), fs::path("../../blobs") / q8.published_sha256) << "relative, as every hub client writes";
  EXPECT_EQ(read_file(model), q8.bytes);
  EXPECT_EQ(read_file(repo / "refs" / "main"), kCommit);
  EXPECT_FALSE(fs::exists(repo / "snapshots" / kCommit / "tiny-Q4_K_M.gguf")) << "only the quant asked for";

  const std::size_t served = hub.served();
  const Pulled again = pull(hub, cache.path, "test/tiny-GGUF:Q8_0");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("downloaded: 0 bytes"), std::string::npos) << again.output;
  EXPECT_EQ(hub.served(), served) << "nothing fetched twice";

  // The hub out of reach: what the cache holds for the revision serves, and so does offline mode.
  const Pulled down = run_pull(nowhere(), cache.path, "test/tiny-GGUF:Q8_0");
  EXPECT_EQ(down.status, 0) << down.output;
  EXPECT_NE(down.output.find("using the cached " + std::string(kCommit)), std::string::npos) << down.output;
  EXPECT_NE(down.output.find("model: " + model.string()), std::string::npos) << down.output;
  const Pulled offline = pull(hub, cache.path, "test/tiny-GGUF:Q8_0", "HF_HUB_OFFLINE=1");
  EXPECT_EQ(offline.status, 0) << offline.output;
  EXPECT_EQ(hub.served(), served);
}

TEST(Hub, APartialDownloadResumesWhereItStopped) {
  LocalHub hub;
  TempDir cache;
  const auto& q4 = hub.file("test/tiny-GGUF", "tiny-Q4_K_M.gguf");
  const fs::path blobs = cache.path / "models--test--tiny-GGUF" / "blobs";
  fs::create_directories(blobs);
  const std::size_t half = q4.bytes.size() / 2;
  std::ofstream(blobs / (q4.published_sha256 + ".incomplete"), std::ios::binary) << q4.bytes.substr(0, half);
  const Pulled got = pull(hub, cache.path, "test/tiny-GGUF --no-mmproj");
  ASSERT_EQ(got.status, 0) << got.output;
  EXPECT_EQ(hub.ranges(), std::vector<std::size_t>{half});
  EXPECT_EQ(hub.served(), q4.bytes.size() - half);
  EXPECT_EQ(read_file(blobs / q4.published_sha256), q4.bytes);
  EXPECT_FALSE(fs::exists(blobs / (q4.published_sha256 + ".incomplete")));
}

TEST(Hub, BytesThatAreNotThePublishedSha256AreRefusedAndNotKept) {
  LocalHub hub;
  TempDir cache;
  const Pulled got = pull(hub, cache.path, "test/bad-GGUF");
  EXPECT_NE(got.status, 0);
  EXPECT_NE(got.output.find("SHA-256"), std::string::npos) << got.output;
  const fs::path blobs = cache.path / "models--test--bad-GGUF" / "blobs";
  EXPECT_TRUE(!fs::exists(blobs) || fs::is_empty(blobs)) << "neither the blob nor a partial file stays";
}

TEST(Hub, WhatIsMissingIsSaidClearly) {
  LocalHub hub;
  TempDir cache;
  const Pulled missing = pull(hub, cache.path, "nobody/nothing");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("repository nobody/nothing (revision main): not found on " + hub.endpoint()), std::string::npos)
      << missing.output;
  const Pulled quant = pull(hub, cache.path, "test/tiny-GGUF:IQ2_XXS");
  EXPECT_NE(quant.status, 0);
  EXPECT_NE(quant.output.find("no GGUF for quant IQ2_XXS (GGUF files: tiny-Q4_K_M.gguf, tiny-Q8_0.gguf)"), std::string::npos)
      << quant.output;
  const Pulled gated = pull(hub, cache.path, "test/gated-GGUF");
  EXPECT_NE(gated.status, 0);
  EXPECT_NE(gated.output.find("set HF_TOKEN"), std::string::npos) << gated.output;
  EXPECT_EQ(pull(hub, cache.path, "test/gated-GGUF", "HF_TOKEN=secret").status, 0);
  const Pulled bad = pull(hub, cache.path, "not-a-repo");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("is not OWNER/NAME[:QUANT]"), std::string::npos) << bad.output;
  // Unreachable, with nothing cached: said; with the revision cached: served from the cache.
  const Pulled down = run_pull(nowhere(), cache.path, "test/tiny-GGUF");
  EXPECT_NE(down.status, 0);
  EXPECT_NE(down.output.find("cannot reach http://127.0.0.1:"), std::string::npos) << down.output;
}

TEST(Hub, ServeByNameLoadsTheModelAndItsProjector) {
  LocalHub hub;
  TempDir cache;
  ServerConfig config;
  config.model.clear();
  config.extra_args = {"--hf-repo", "test/tiny-GGUF:Q4_K_M"};
  config.env = {{"HF_ENDPOINT", hub.endpoint()}, {"HF_HUB_CACHE", cache.path.string()}};
  ServerProcess server(std::move(config));
  EXPECT_NE(server.log().find("hub: test/tiny-GGUF:Q4_K_M at commit " + std::string(kCommit)), std::string::npos)
      << server.log();
  const fs::path snapshot = cache.path / "models--test--tiny-GGUF" / "snapshots" / kCommit;
  EXPECT_NE(server.log().find("projector " + (snapshot / "mmproj-tiny-f16.gguf").string()), std::string::npos)
      << "the repository's projector is loaded beside the model: " << server.log();
  auto client = server.client();
  const JsonReply models = get_json(*client, "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body["data"][0]["id"], "tiny-Q4_K_M");
  const JsonReply reply = post_json(*client, "/v1/chat/completions",
                                    {{"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})}, {"max_tokens", 3}});
  EXPECT_EQ(reply.status, 200) << reply.raw;
}

}  // namespace
}  // namespace prefixd::testing
