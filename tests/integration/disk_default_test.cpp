// The disk tier by default: with no disk flag a server keeps it in the user's cache directory
// ($XDG_CACHE_HOME/prefixd here), sized from the free space, and after a restart with no flags the
// same prompt comes back from it; two servers with the default take distinct directories, a
// --cache-disk-path another server holds is refused, and --no-cache-disk keeps none.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include "server_process.h"

namespace prefixd::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct CacheHome {
  CacheHome() {
    std::string name = "/tmp/prefixd-cache-home-XXXXXX";
    if (::mkdtemp(name.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = name;
  }
  ~CacheHome() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  // A server with nothing but the environment a user has: its cache home.
  ServerConfig server(std::vector<std::string> args = {}) const {
    ServerConfig config;
    config.extra_args = std::move(args);
    config.env = {{"XDG_CACHE_HOME", path.string()}, {"PREFIXD_CACHE_DISK", "true"}};
    return config;
  }
  fs::path path;
};

json ask(ServerProcess& server, const std::string& prompt) {
  auto client = server.client();
  const JsonReply reply = post_json(*client, "/v1/completions",
                                    {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(reply.status, 200) << reply.raw;
  return reply.body;
}

void wait_for_disk(ServerProcess& server) {
  auto client = server.client();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const json disk = get_json(*client, "/v1/cache/stats").body["tiers"]["disk"];
    if (disk["queue_bytes"] == 0 && disk["entries"].get<int>() > 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "the disk tier did not settle";
}

std::string long_prompt() {
  std::string text;
  for (int i = 0; i < 55; ++i) text += "Clause " + std::to_string(i) + " of the lease binds tenant and landlord alike. ";
  return text;
}

TEST(DiskDefault, ARestartWithNoFlagsServesThePromptFromTheDefaultDirectory) {
  CacheHome home;
  const std::string prompt = long_prompt();
  {
    ServerProcess server(home.server());
    EXPECT_NE(server.log().find("disk tier: " + (home.path / "prefixd").string() + " (the default location"),
              std::string::npos) << server.log();
    ask(server, prompt);
    wait_for_disk(server);
    EXPECT_TRUE(fs::exists(home.path / "prefixd" / "kv"));
  }
  ServerProcess restarted(home.server());
  const json reply = ask(restarted, prompt);
  const int prompt_tokens = reply["usage"]["prompt_tokens"].get<int>();
  EXPECT_EQ(reply["prompt_cache"]["tier"], "disk") << reply.dump();
  EXPECT_GE(reply["prompt_cache"]["cached_tokens"].get<int>() * 100, prompt_tokens * 98) << reply.dump();
}

TEST(DiskDefault, TwoServersTakeDistinctDirectoriesAndAHeldPathIsRefused) {
  CacheHome home;
  ServerProcess first(home.server());
  ServerProcess second(home.server());
  const fs::path base = home.path / "prefixd";
  EXPECT_NE(second.log().find("disk tier: " + (base / "instance-2").string()), std::string::npos) << second.log();
  ask(first, long_prompt());
  ask(second, long_prompt() + " Second.");
  wait_for_disk(first);
  wait_for_disk(second);

  // An explicit directory another server holds: refused at startup, naming it and the holder.
  const std::string command = std::string(PREFIXD_BINARY) + " serve --model " + PREFIXD_TINY_MODEL +
                              " --port 0 --model-fingerprint-cache off --cache-disk-path " + base.string() + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  EXPECT_NE(status, 0);
  EXPECT_NE(output.find("another prefixd (pid " + std::to_string(first.pid()) + ") uses this directory"),
            std::string::npos) << output;
}

TEST(DiskDefault, NoCacheDiskKeepsNoneAndContradictingFlagsAreRefused) {
  CacheHome home;
  {
    ServerProcess server(home.server({"--no-cache-disk"}));
    ask(server, long_prompt());
    auto client = server.client();
    EXPECT_FALSE(get_json(*client, "/v1/cache/stats").body["tiers"]["disk"].value("enabled", true));
  }
  EXPECT_FALSE(fs::exists(home.path / "prefixd" / "kv"));
  const std::string command = std::string(PREFIXD_BINARY) + " serve --model " + PREFIXD_TINY_MODEL +
                              " --port 0 --no-cache-disk --cache-disk-path " + home.path.string() + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  EXPECT_NE(::pclose(pipe), 0);
  EXPECT_NE(output.find("--no-cache-disk and --cache-disk-path contradict"), std::string::npos) << output;
}

}  // namespace
}  // namespace prefixd::testing
