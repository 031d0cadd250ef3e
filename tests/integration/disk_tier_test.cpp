// The disk tier through the real server: restarts (SIGTERM and kill -9), damaged and foreign files,
// a full disk, a read-only directory, and saved artifacts.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace prefixd::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A fresh directory under /tmp, removed with everything in it (after unmounting a test's mount).
class TempDir {
 public:
  TempDir() {
    std::string name = "/tmp/prefixd-disk-test-XXXXXX";
    if (::mkdtemp(name.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = name;
  }
  ~TempDir() {
    ::umount2(path_.c_str(), MNT_DETACH);  // when a test mounted something there
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

std::string system_prompt(int rules) {
  std::string text = "You are a careful archivist. ";
  for (int i = 0; i < rules; ++i) text += "Rule " + std::to_string(i) + ": file every letter by sender, date and topic. ";
  return text;
}

json first_turn(const std::string& question, int rules = 60) {
  return {{"messages", json::array({{{"role", "system"}, {"content", system_prompt(rules)}},
                                    {{"role", "user"}, {"content", question}}})},
          {"max_tokens", 6},
          {"temperature", 0},
          {"prompt_cache_key", "archive"}};
}

json next_turn(json request, const std::string& reply, const std::string& question) {
  request["messages"].push_back({{"role", "assistant"}, {"content", reply}});
  request["messages"].push_back({{"role", "user"}, {"content", question}});
  return request;
}

json chat(httplib::Client& client, const json& request) {
  const auto reply = post_json(client, "/v1/chat/completions", request);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  return reply.body;
}

std::string content(const json& reply) { return reply["choices"][0]["message"]["content"].get<std::string>(); }

json disk_stats(httplib::Client& client) { return get_json(client, "/v1/cache/stats").body["tiers"]["disk"]; }

// Waits until the write-behind queue is empty and at least `files` files are indexed.
json wait_for_disk(httplib::Client& client, int files = 1) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  json disk;
  do {
    disk = disk_stats(client);
    if (disk["queue_bytes"] == 0 && disk["entries"].get<int>() >= files) return disk;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  ADD_FAILURE() << "the disk tier did not settle: " << disk.dump();
  return disk;
}

ServerConfig disk_server(const std::string& dir, std::vector<std::string> extra = {}) {
  ServerConfig config;
  config.extra_args = {"--cache-disk-path", dir};
  config.extra_args.insert(config.extra_args.end(), extra.begin(), extra.end());
  return config;
}

std::vector<fs::path> record_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir / "kv", ec); !ec && it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_regular_file()) out.push_back(it->path());
  }
  std::ranges::sort(out);
  return out;
}

// The reference: what the model answers with no cache at all.
std::string cold_answer(const json& request, ServerConfig config = {}) {
  ServerProcess server(std::move(config));
  auto client = server.client();
  json uncached = request;
  uncached["cache_prompt"] = false;
  return content(chat(*client, uncached));
}

// Warms a two-turn conversation on a server using `dir`; returns the second turn's request.
json warm_conversation(const std::string& dir) {
  ServerProcess server(disk_server(dir));
  auto client = server.client();
  const json first = first_turn("Where are the letters from 1901?");
  const json reply = chat(*client, first);
  wait_for_disk(*client);
  return next_turn(first, content(reply), "And those from 1902?");
}

void expect_disk_hit(const json& reply, const json& request) {
  const json& cache = reply["prompt_cache"];
  EXPECT_EQ(cache["outcome"], "hit_restore") << cache.dump();
  EXPECT_EQ(cache["tier"], "disk") << cache.dump();
  const int prompt = reply["usage"]["prompt_tokens"].get<int>();
  EXPECT_GT(cache["cached_tokens"].get<int>(), prompt - 40) << "only the new turn is fed: " << cache.dump();
  EXPECT_EQ(cache["fed_tokens"].get<int>(), prompt - cache["cached_tokens"].get<int>());
  (void)request;
}

TEST(DiskTier, AfterSigtermTheNextTurnHitsFromDiskWithTheColdAnswer) {
  TempDir dir;
  const json second = warm_conversation(dir.str());  // the server is stopped with SIGTERM
  ServerProcess server(disk_server(dir.str()));
  auto client = server.client();
  const json reply = chat(*client, second);
  expect_disk_hit(reply, second);
  EXPECT_EQ(content(reply), cold_answer(second));
  const json disk = disk_stats(*client);
  EXPECT_EQ(disk["hits"], 1);
  EXPECT_GT(disk["reads"].get<int>(), 0);
  EXPECT_GT(disk["promoted"]["segments"].get<int>(), 0);
  EXPECT_NE(get_json(*client, "/metrics").raw.find("prefixd_prompt_cache_disk_hits_total 1"), std::string::npos);
}

TEST(DiskTier, AfterKillNineTheNextTurnHitsFromDiskWithTheColdAnswer) {
  TempDir dir;
  json second;
  {
    ServerProcess server(disk_server(dir.str()));
    auto client = server.client();
    const json first = first_turn("Where are the letters from 1901?");
    const json reply = chat(*client, first);
    wait_for_disk(*client);
    second = next_turn(first, content(reply), "And those from 1902?");
    ASSERT_EQ(::kill(server.pid(), SIGKILL), 0);
    while (server.running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ServerProcess server(disk_server(dir.str()));
  auto client = server.client();
  const json reply = chat(*client, second);
  expect_disk_hit(reply, second);
  EXPECT_EQ(content(reply), cold_answer(second));
}

// A draft model's prompt cache keeps its own disk directory inside the model's: after a restart,
// the drafter reads a prompt it read before from there, and the model's files are untouched by it.
TEST(DiskTier, ADraftModelsCacheSurvivesARestartInItsOwnDirectory) {
  TempDir dir;
  const std::vector<std::string> drafting = {"--model-draft", std::string(PREFIXD_TEST_MODELS_DIR) + "/tiny-first-block.gguf",
                                             "--draft-when", "always"};
  json request = first_turn("Where are the letters from 1901?");
  request["max_tokens"] = 24;
  request["ignore_eos"] = true;
  long prompt = 0;
  {
    ServerProcess server(disk_server(dir.str(), drafting));
    auto client = server.client();
    const json reply = chat(*client, request);
    prompt = reply["usage"]["prompt_tokens"].get<long>();
    ASSERT_TRUE(reply["prompt_cache"].contains("draft")) << reply.dump();
    EXPECT_EQ(reply["prompt_cache"]["draft"]["fed_tokens"].get<long>(), prompt) << reply.dump();
    wait_for_disk(*client);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    json draft;
    do {
      draft = get_json(*client, "/v1/cache/stats").body["draft"];
      if (draft["disk_files"].get<int>() > 0 && draft["disk_queue_bytes"] == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    EXPECT_GT(draft["disk_files"].get<int>(), 0) << draft.dump();
  }
  EXPECT_TRUE(fs::is_directory(dir.path() / "draft-model" / "kv"));
  const std::vector<fs::path> model_files = record_files(dir.path());
  EXPECT_FALSE(model_files.empty());
  ServerProcess server(disk_server(dir.str(), drafting));
  auto client = server.client();
  const json reply = chat(*client, request);
  EXPECT_GT(reply["prompt_cache"]["draft"]["cached_tokens"].get<long>(), 0) << reply.dump();
  EXPECT_EQ(reply["prompt_cache"]["draft"]["cached_tokens"].get<long>() + reply["prompt_cache"]["draft"]["fed_tokens"].get<long>(),
            prompt) << reply.dump();
  EXPECT_GT(get_json(*client, "/v1/cache/stats").body["draft"]["disk_hits"].get<int>(), 0);
  EXPECT_EQ(record_files(dir.path()), model_files) << "the drafter's store removed or added the model's files";
}

void flip_byte(const fs::path& file, std::uintmax_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x5a));
}

// The first position a record file holds (the header's little-endian `begin` field, after the
// magic, version, kind and four digests).
int begin_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  in.seekg(8 + 4 + 4 + 32 * 4);
  unsigned char b[4] = {};
  in.read(reinterpret_cast<char*>(b), 4);
  return static_cast<int>(b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<unsigned>(b[3]) << 24));
}

TEST(DiskTier, DamagedAndForeignFilesAreCountedRemovedAndNeverRestored) {
  TempDir dir, other;
  const json second = warm_conversation(dir.str());
  std::vector<fs::path> files = record_files(dir.path());
  ASSERT_GE(files.size(), 3u);
  // A file another model wrote (the gemma3 test model with the full window cache: same format,
  // another model key), copied in under its own name.
  {
    ServerProcess foreign(ServerConfig{.model = PREFIXD_TEST_MODELS_DIR "/gemma3-tiny.gguf",
                                       .extra_args = {"--cache-disk-path", other.str(), "--swa-full", "on"}});
    auto client = foreign.client();
    chat(*client, first_turn("Where are the letters from 1901?"));
    wait_for_disk(*client);
  }
  const std::vector<fs::path> foreign_files = record_files(other.path());
  ASSERT_FALSE(foreign_files.empty());
  const fs::path foreign_copy = dir.path() / "kv" / foreign_files.front().parent_path().filename() / foreign_files.front().filename();
  fs::create_directories(foreign_copy.parent_path());
  fs::copy_file(foreign_files.front(), foreign_copy);
  // The segment at position 0 has a payload byte flipped (found when a lookup reads it); two others
  // are truncated and have their header changed (both found at startup).
  std::ranges::partition(files, [](const fs::path& f) { return begin_of(f) == 0; });
  ASSERT_EQ(begin_of(files[0]), 0);
  flip_byte(files[0], fs::file_size(files[0]) - 100);
  fs::resize_file(files[1], fs::file_size(files[1]) - 10);
  flip_byte(files[2], 40);
  std::ofstream(dir.path() / "tmp" / "leftover.tmp") << "half a write";

  {
    ServerProcess server(disk_server(dir.str()));
    auto client = server.client();
    json disk = disk_stats(*client);
    EXPECT_EQ(disk["removed"]["truncated"], 1) << disk.dump();
    EXPECT_EQ(disk["removed"]["checksum"], 1) << disk.dump();
    EXPECT_EQ(disk["removed"]["foreign"], 1) << disk.dump();
    EXPECT_EQ(disk["removed"]["incomplete"], 1) << disk.dump();
    EXPECT_FALSE(fs::exists(foreign_copy));
    EXPECT_FALSE(fs::exists(files[1]));
    const json reply = chat(*client, second);
    EXPECT_NE(reply["prompt_cache"]["tier"], "disk") << reply["prompt_cache"].dump();
    EXPECT_EQ(content(reply), cold_answer(second));
    disk = disk_stats(*client);
    EXPECT_EQ(disk["removed"]["checksum"], 2) << "the flipped payload is found when read: " << disk.dump();
    EXPECT_EQ(disk["hits"], 0);
    // The cold request's own prefix is written again, under the same names, from its fresh K/V.
    wait_for_disk(*client, 3);
  }  // one server per directory: the next one starts after this one has gone
  ServerProcess after(disk_server(dir.str()));
  auto after_client = after.client();
  const json rebuilt = disk_stats(*after_client);
  EXPECT_EQ(rebuilt["removed"]["checksum"].get<int>() + rebuilt["removed"]["truncated"].get<int>(), 0) << rebuilt.dump();
}

// Waits until the write-behind has failed at least once (or 20 s passed); returns the disk stats.
json wait_for_write_errors(httplib::Client& client) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  json disk;
  do {
    disk = disk_stats(client);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (disk["write_errors"] == 0 && std::chrono::steady_clock::now() < deadline);
  return disk;
}

// Puts this process, and the servers it starts from now on, in a private mount namespace, so a test
// can mount over its own directory (the suite runs as root inside the build environment).
void private_mounts() {
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << "unshare: " << std::strerror(errno) << " (the disk tests need root)";
  // Inside the build environment's chroot "/" is no mount point (EINVAL); its namespace is private
  // already. Elsewhere, keep the test's mounts from propagating out.
  ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr);
}

TEST(DiskTier, AFullDiskIsCountedAndRequestsAreAnswered) {
  private_mounts();
  TempDir dir;
  ASSERT_EQ(::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=96k"), 0) << std::strerror(errno);
  ServerProcess server(disk_server(dir.str()));
  auto client = server.client();
  const json first = first_turn("Where are the letters from 1901?");
  const json reply = chat(*client, first);
  const json disk = wait_for_write_errors(*client);
  EXPECT_GT(disk["write_errors"].get<int>(), 0) << disk.dump();
  EXPECT_NE(server.log().find("No space left on device"), std::string::npos) << server.log();
  EXPECT_TRUE(fs::is_empty(dir.path() / "tmp")) << "a failed write leaves no temporary file";
  EXPECT_EQ(content(reply), cold_answer(first));
  const json again = chat(*client, first);  // memory still serves it
  EXPECT_GT(again["prompt_cache"]["cached_tokens"].get<int>(), 0) << again["prompt_cache"].dump();
  EXPECT_NE(again["prompt_cache"]["tier"], "disk") << again["prompt_cache"].dump();
  EXPECT_EQ(content(again), content(reply));
}

TEST(DiskTier, AReadOnlyDirectoryIsCountedAndRequestsAreAnswered) {
  private_mounts();
  TempDir dir;
  fs::create_directories(dir.path() / "kv");
  fs::create_directories(dir.path() / "tmp");
  ASSERT_EQ(::mount(dir.path().c_str(), dir.path().c_str(), nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
  ASSERT_EQ(::mount(nullptr, dir.path().c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr), 0)
      << std::strerror(errno);
  ServerProcess server(disk_server(dir.str()));
  auto client = server.client();
  const json first = first_turn("Where are the letters from 1901?");
  const json reply = chat(*client, first);
  const json disk = wait_for_write_errors(*client);
  EXPECT_GT(disk["write_errors"].get<int>(), 0) << disk.dump();
  EXPECT_EQ(disk["entries"], 0);
  EXPECT_NE(server.log().find("Read-only file system"), std::string::npos) << server.log();
  EXPECT_EQ(content(reply), cold_answer(first));
}

TEST(DiskTier, KillNineDuringWriteBehindNeverLeavesABadFileOrAWrongAnswer) {
  TempDir dir;
  std::mt19937 rng(7);
  std::vector<json> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(first_turn("Which shelf holds box " + std::to_string(i) + "?", 40 + 15 * i));
  std::vector<std::string> expected;
  {
    ServerProcess reference;
    auto client = reference.client();
    for (json r : requests) {
      r["cache_prompt"] = false;
      expected.push_back(content(chat(*client, r)));
    }
  }
  for (int round = 0; round < 5; ++round) {
    ServerProcess server(disk_server(dir.str()));
    auto client = server.client();
    const json disk = disk_stats(*client);
    EXPECT_EQ(disk["removed"]["checksum"], 0) << "round " << round << ": " << disk.dump();
    EXPECT_EQ(disk["removed"]["truncated"], 0) << "round " << round << ": " << disk.dump();
    EXPECT_EQ(disk["removed"]["version"], 0) << "round " << round << ": " << disk.dump();
    for (size_t i = 0; i < requests.size(); ++i) {
      const json reply = chat(*client, requests[i]);
      EXPECT_EQ(content(reply), expected[i]) << "round " << round << ", request " << i << ": "
                                             << reply["prompt_cache"].dump();
    }
    // Kill while the last replies are still being written behind.
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng)));
    ASSERT_EQ(::kill(server.pid(), SIGKILL), 0);
    while (server.running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ServerProcess server(disk_server(dir.str()));
  auto client = server.client();
  const json disk = disk_stats(*client);
  EXPECT_GT(disk["entries"].get<int>(), 0);
  EXPECT_EQ(disk["removed"]["checksum"].get<int>() + disk["removed"]["truncated"].get<int>(), 0) << disk.dump();
}

TEST(DiskTier, TheDirectoryStaysWithinItsCapLeavesFirst) {
  TempDir dir;
  ServerProcess server(disk_server(dir.str(), {"--cache-disk-max-bytes", "300000"}));
  auto client = server.client();
  for (int i = 0; i < 6; ++i) {
    chat(*client, first_turn("Which shelf holds box " + std::to_string(i) + "?", 30 + 10 * i));
    wait_for_disk(*client);
    std::uintmax_t bytes = 0;
    for (const fs::path& f : record_files(dir.path())) bytes += fs::file_size(f);
    EXPECT_LE(bytes, 300000u) << "after request " << i;
  }
  const json disk = disk_stats(*client);
  EXPECT_GT(disk["removed"]["capacity"].get<int>(), 0) << disk.dump();
  EXPECT_LE(disk["bytes"].get<std::uint64_t>(), 300000u);
}

// ---- every model family --------------------------------------------------------------------------

struct Family {
  const char* name;
  const char* model;
  std::vector<std::string> args;
};

class DiskTierFamily : public ::testing::TestWithParam<Family> {};

ServerConfig family_server(const Family& f, const std::string& dir = {}) {
  ServerConfig config{.model = std::string(PREFIXD_TEST_MODELS_DIR) + "/" + f.model, .extra_args = f.args,
                      .parallel = 1, .ctx_size = 4096};
  if (!dir.empty()) {
    config.extra_args.push_back("--cache-disk-path");
    config.extra_args.push_back(dir);
  }
  return config;
}

void wait_until_idle(httplib::Client& client) {
  for (int i = 0; i < 500 && get_json(client, "/v1/cache/stats").body["running"] != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Recurrent and hybrid models resume only at checkpoints: theirs are stored on disk like segments,
// so after a restart the next turn still feeds only what is new.
TEST_P(DiskTierFamily, AfterARestartTheNextTurnHitsFromDiskWithTheColdAnswer) {
  const Family& family = GetParam();
  TempDir dir;
  const json first = first_turn("Where are the letters from 1901?", 30);
  int first_prompt = 0;
  json second;
  {
    ServerProcess server(family_server(family, dir.str()));
    auto client = server.client();
    const json reply = chat(*client, first);
    first_prompt = reply["usage"]["prompt_tokens"].get<int>();
    wait_until_idle(*client);
    wait_for_disk(*client);
    second = next_turn(first, "On the second shelf.", "And those from 1902?");
  }
  ServerProcess server(family_server(family, dir.str()));
  auto client = server.client();
  const json reply = chat(*client, second);
  const json& cache = reply["prompt_cache"];
  EXPECT_EQ(content(reply), cold_answer(second, family_server(family)));
  EXPECT_EQ(cache["fed_tokens"].get<int>(), reply["usage"]["prompt_tokens"].get<int>() - cache["cached_tokens"].get<int>());
  const json disk = disk_stats(*client);
  EXPECT_EQ(cache["tier"], "disk") << cache.dump();
  EXPECT_GE(cache["cached_tokens"].get<int>(), first_prompt - 1) << cache.dump();
  EXPECT_EQ(disk["hits"], 1) << disk.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Families, DiskTierFamily,
    ::testing::Values(Family{"hybrid", "qwen35-tiny.gguf", {}}, Family{"recurrent", "mamba2-tiny.gguf", {}},
                      Family{"window_only", "gemma3-tiny.gguf", {"--swa-full", "off"}},
                      Family{"window_auto", "gemma3-tiny.gguf", {}},  // auto: the full window cache (it fits)
                      Family{"full_window", "gemma3-tiny.gguf", {"--swa-full", "on"}}),
    [](const ::testing::TestParamInfo<Family>& info) { return std::string(info.param.name); });

// ---- artifacts ---------------------------------------------------------------------------------

TEST(Artifacts, SaveByKeyThenLoadAfterAResetServesTheNextTurn) {
  TempDir dir;
  ServerProcess server(disk_server(dir.str()));
  auto client = server.client();
  const json first = first_turn("Where are the letters from 1901?");
  const json reply = chat(*client, first);
  const auto saved = post_json(*client, "/v1/cache/save", {{"name", "archive-1"}, {"prompt_cache_key", "archive"}});
  ASSERT_EQ(saved.status, 200) << saved.raw;
  EXPECT_EQ(saved.body["operation"], "save");
  EXPECT_GT(saved.body["tokens"].get<int>(), reply["usage"]["prompt_tokens"].get<int>() - 2);
  EXPECT_TRUE(fs::exists(dir.path() / "artifacts" / "archive-1.prefixd"));
  ASSERT_EQ(post_json(*client, "/v1/cache/reset", json::object()).status, 200);
  const auto loaded = post_json(*client, "/v1/cache/load", {{"name", "archive-1"}});
  ASSERT_EQ(loaded.status, 200) << loaded.raw;
  EXPECT_EQ(loaded.body["tokens"], saved.body["tokens"]);
  EXPECT_GT(loaded.body["segments"].get<int>(), 0);
  const json second = next_turn(first, content(reply), "And those from 1902?");
  const json hit = chat(*client, second);
  EXPECT_EQ(hit["prompt_cache"]["outcome"], "hit_restore") << hit["prompt_cache"].dump();
  // The reply as the next turn renders it may differ from the generated tokens in its last few.
  EXPECT_GT(hit["prompt_cache"]["cached_tokens"].get<int>(), saved.body["tokens"].get<int>() - 20);
  EXPECT_EQ(content(hit), cold_answer(second));
}

TEST(Artifacts, SaveByMessagesAndRefusalsChangeNothing) {
  TempDir dir, other;
  ServerProcess server(disk_server(dir.str()));
  auto client = server.client();
  const json first = first_turn("Where are the letters from 1901?");
  chat(*client, first);
  json save = first;
  save["name"] = "by-messages";
  const auto saved = post_json(*client, "/v1/cache/save", save);
  ASSERT_EQ(saved.status, 200) << saved.raw;
  const fs::path file = dir.path() / "artifacts" / "by-messages.prefixd";

  EXPECT_EQ(post_json(*client, "/v1/cache/save", {{"name", "../escape"}, {"prompt_cache_key", "archive"}}).status, 400);
  EXPECT_EQ(post_json(*client, "/v1/cache/save", {{"name", "x"}}).status, 400);
  const auto unknown = post_json(*client, "/v1/cache/save", {{"name", "x"}, {"prompt_cache_key", "nobody"}});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.body["error"]["code"], "nothing_cached");
  const auto missing = post_json(*client, "/v1/cache/load", {{"name", "never-saved"}});
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body["error"]["code"], "artifact_not_found");

  // Another model refuses it; a damaged or other-version copy is refused here; nothing is stored.
  {
    ServerProcess foreign(ServerConfig{.model = PREFIXD_TEST_MODELS_DIR "/gemma3-tiny.gguf",
                                       .extra_args = {"--cache-artifact-path", (dir.path() / "artifacts").string(),
                                                      "--swa-full", "on"}});
    auto foreign_client = foreign.client();
    const auto refused = post_json(*foreign_client, "/v1/cache/load", {{"name", "by-messages"}});
    EXPECT_EQ(refused.status, 409) << refused.raw;
    EXPECT_EQ(refused.body["error"]["code"], "artifact_model_mismatch");
    EXPECT_EQ(get_json(*foreign_client, "/v1/cache/stats").body["tiers"]["host"]["entries"], 0);
  }
  ASSERT_EQ(post_json(*client, "/v1/cache/reset", json::object()).status, 200);
  fs::copy_file(file, dir.path() / "artifacts" / "damaged.prefixd");
  flip_byte(dir.path() / "artifacts" / "damaged.prefixd", fs::file_size(file) - 5);
  const auto damaged = post_json(*client, "/v1/cache/load", {{"name", "damaged"}});
  EXPECT_EQ(damaged.status, 422) << damaged.raw;
  EXPECT_EQ(damaged.body["error"]["code"], "artifact_corrupt");
  fs::copy_file(file, dir.path() / "artifacts" / "future.prefixd");
  flip_byte(dir.path() / "artifacts" / "future.prefixd", 8);  // the format version
  const auto future = post_json(*client, "/v1/cache/load", {{"name", "future"}});
  EXPECT_EQ(future.status, 409) << future.raw;
  EXPECT_EQ(future.body["error"]["code"], "artifact_version_mismatch");
  const json stats = get_json(*client, "/v1/cache/stats").body;
  EXPECT_EQ(stats["tiers"]["host"]["entries"], 0) << "a refused artifact stores nothing";
  EXPECT_EQ(post_json(*client, "/v1/cache/load", {{"name", "by-messages"}}).status, 200);
  EXPECT_GT(get_json(*client, "/v1/cache/stats").body["tiers"]["host"]["entries"].get<int>(), 0);
}

TEST(Artifacts, OffWithoutADirectory) {
  ServerProcess server;
  auto client = server.client();
  const auto reply = post_json(*client, "/v1/cache/save", {{"name", "x"}, {"prompt_cache_key", "archive"}});
  EXPECT_EQ(reply.status, 501);
  EXPECT_EQ(reply.body["code"], "prompt_cache_unsupported");
  EXPECT_FALSE(reply.body["capabilities"]["supports_save"].get<bool>());
}

}  // namespace
}  // namespace prefixd::testing
