// `prefixd cache` on a directory a DiskStore wrote: ls lists every file, verify finds a flipped
// byte and removes it only when told, gc trims below the limit with files a server still accepts,
// and bad input is an error on stderr with a non-zero exit status.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cache/disk_directory.h"
#include "cache/disk_store.h"
#include "server_process.h"
#include "support/disk_fixtures.h"

namespace prefixd::testing {
namespace {

namespace fs = std::filesystem;
using cache::Digest;
using cache::Record;

const Digest kModel = test_digest(0x31, 1);

// Runs `[ENV] prefixd cache ARGS` through the shell; `stderr_only` keeps only what it wrote to
// stderr, else both streams.
CommandResult prefixd_cache(const std::string& args, bool stderr_only = false, const std::string& env = "") {
  return run_shell(env + " " + PREFIXD_BINARY + " cache " + args + (stderr_only ? " 2>&1 >/dev/null" : " 2>&1"));
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// A chain of three segments, two unrelated leaves and a checkpoint, written by a real store.
class CacheCli : public ::testing::Test {
 protected:
  void SetUp() override {
    Digest parent = test_digest(1, 0);
    for (int i = 0; i < 3; ++i) {
      records_.push_back(test_segment(kModel, test_digest(1, i + 1), parent, i * 8, 8, 4096));
      parent = records_.back().meta.key;
    }
    for (int i = 0; i < 2; ++i) {
      records_.push_back(test_segment(kModel, test_digest(2, i + 1), test_digest(2, 0), 0, 8, 4096));
    }
    records_.push_back(test_checkpoint(kModel, test_digest(3, 1), 16, 2048));
    cache::DiskStore store(cache::DiskStore::Options{dir_.path(), 1ull << 30, 1ull << 30, kModel});
    for (const Record& r : records_) {
      ASSERT_TRUE(store.enqueue(cache::DiskStore::Job{{r}, {}}));
      store.flush();
    }
    for (const Record& r : records_) total_ += record_file_bytes(r);
  }

  fs::path file_of(const Record& r) const { return cache::record_path(dir_.path(), r.meta.key, r.meta.kind); }
  std::string dir_arg() const { return " --cache-disk-path " + quoted(dir_.path()); }

  TempDir dir_{"cache-cli"};
  std::vector<Record> records_;
  std::uint64_t total_ = 0;
};

TEST_F(CacheCli, LsListsEveryFileAndTheTotal) {
  const CommandResult ls = prefixd_cache("ls" + dir_arg());
  ASSERT_EQ(ls.status, 0) << ls.output;
  for (const Record& r : records_) EXPECT_NE(ls.output.find(cache::to_hex(r.meta.key).substr(0, 16)), std::string::npos);
  EXPECT_NE(ls.output.find("total: 6 files (5 segments, 1 checkpoints, 0 invalid), " + std::to_string(total_) + " bytes"),
            std::string::npos)
      << ls.output;
  EXPECT_NE(ls.output.find("40 tokens"), std::string::npos) << ls.output;

  const CommandResult json = prefixd_cache("ls --json" + dir_arg());
  ASSERT_EQ(json.status, 0) << json.output;
  const nlohmann::json files = nlohmann::json::parse(json.output);
  ASSERT_EQ(files.size(), records_.size());
  for (std::size_t i = 1; i < files.size(); ++i) {
    EXPECT_GE(files[i - 1]["last_use_unix_ms"].get<std::int64_t>(), files[i]["last_use_unix_ms"].get<std::int64_t>());
  }
  EXPECT_EQ(files[0]["fault"], "none");
  EXPECT_EQ(files[0]["model"], cache::to_hex(kModel));
}

TEST_F(CacheCli, PathComesFromTheEnvironmentToo) {
  const CommandResult without = prefixd_cache("ls", true, "env -u PREFIXD_CACHE_DISK_PATH");
  EXPECT_NE(without.status, 0);
  EXPECT_NE(without.output.find("--cache-disk-path"), std::string::npos) << without.output;
  const CommandResult with_env = prefixd_cache("ls", false, "PREFIXD_CACHE_DISK_PATH=" + quoted(dir_.path()));
  EXPECT_EQ(with_env.status, 0) << with_env.output;
  EXPECT_NE(with_env.output.find("total: 6 files"), std::string::npos) << with_env.output;
}

TEST_F(CacheCli, VerifyFindsAFlippedByteAndRemovesOnlyWhenTold) {
  CommandResult verify = prefixd_cache("verify" + dir_arg());
  EXPECT_EQ(verify.status, 0) << verify.output;
  EXPECT_NE(verify.output.find("6 ok, 0 bad"), std::string::npos) << verify.output;

  const fs::path damaged = file_of(records_[1]);
  flip_file_byte(damaged, -100);
  verify = prefixd_cache("verify" + dir_arg());
  EXPECT_EQ(verify.status, 1) << verify.output;
  EXPECT_NE(verify.output.find("checksum"), std::string::npos) << verify.output;
  EXPECT_NE(verify.output.find(damaged.string()), std::string::npos) << verify.output;
  EXPECT_NE(verify.output.find("5 ok, 1 bad"), std::string::npos) << verify.output;
  EXPECT_TRUE(fs::exists(damaged)) << "nothing is deleted without --remove";
  EXPECT_EQ(files_under(dir_.path()), 6);

  verify = prefixd_cache("verify --remove" + dir_arg());
  EXPECT_EQ(verify.status, 1) << verify.output;
  EXPECT_FALSE(fs::exists(damaged));
  verify = prefixd_cache("verify" + dir_arg());
  EXPECT_EQ(verify.status, 0) << verify.output;
  EXPECT_NE(verify.output.find("5 ok, 0 bad"), std::string::npos) << verify.output;
}

TEST_F(CacheCli, InspectFindsAFileByKeyPrefix) {
  const std::string key = cache::to_hex(records_[2].meta.key);
  const CommandResult inspect = prefixd_cache("inspect " + key.substr(0, 10) + dir_arg());
  ASSERT_EQ(inspect.status, 0) << inspect.output;
  EXPECT_NE(inspect.output.find(key), std::string::npos) << inspect.output;
  EXPECT_NE(inspect.output.find(cache::to_hex(records_[1].meta.key)), std::string::npos) << "the parent: " << inspect.output;
  EXPECT_NE(inspect.output.find("verifies"), std::string::npos) << inspect.output;
  EXPECT_NE(inspect.output.find("payload bytes     4096"), std::string::npos) << inspect.output;

  flip_file_byte(file_of(records_[2]), -1);
  const CommandResult by_path = prefixd_cache("inspect " + quoted(file_of(records_[2])));
  EXPECT_EQ(by_path.status, 1) << by_path.output;
  EXPECT_NE(by_path.output.find("FAILS: checksum"), std::string::npos) << by_path.output;
}

TEST_F(CacheCli, GcShrinksBelowTheLimitKeepingUsableFiles) {
  // 5 segments of 4320 bytes and a checkpoint of 2240: 23840 bytes. To fit 16 KiB the chain loses
  // its tip, then the segment before it; its root is the least recently used file but another
  // file extends it, so it stays.
  const CommandResult gc = prefixd_cache("gc --max-bytes 16K" + dir_arg());
  ASSERT_EQ(gc.status, 0) << gc.output;
  EXPECT_LE(bytes_under(dir_.path()), 16u * 1024);
  EXPECT_FALSE(fs::exists(file_of(records_[2]))) << gc.output;
  EXPECT_FALSE(fs::exists(file_of(records_[1]))) << gc.output;
  EXPECT_TRUE(fs::exists(file_of(records_[0]))) << gc.output;
  EXPECT_EQ(files_under(dir_.path()), 4);
  EXPECT_NE(gc.output.find("removed 2 files"), std::string::npos) << gc.output;
  // What remains is what a server would keep: it removes nothing when it opens the directory.
  cache::DiskStore store(cache::DiskStore::Options{dir_.path(), 1ull << 30, 1ull << 30, kModel});
  const cache::DiskStats s = store.stats();
  for (std::int64_t removed : s.removed) EXPECT_EQ(removed, 0);
  EXPECT_EQ(s.bytes, bytes_under(dir_.path()));
}

TEST_F(CacheCli, BadInputIsAnErrorOnStderr) {
  CommandResult run = prefixd_cache("ls --cache-disk-path " + quoted(dir_.path() / "missing"), true);
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("prefixd cache: error:"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("does not exist"), std::string::npos) << run.output;
  EXPECT_FALSE(fs::exists(dir_.path() / "missing")) << "the tool never creates a directory";

  run = prefixd_cache("verify --cache-disk-path " + quoted(file_of(records_[0])), true);
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("is not a directory"), std::string::npos) << run.output;

  run = prefixd_cache("inspect ffffffffff" + dir_arg(), true);
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("no file"), std::string::npos) << run.output;

  run = prefixd_cache("gc --max-bytes lots" + dir_arg(), true);
  EXPECT_NE(run.status, 0);
  EXPECT_EQ(files_under(dir_.path()), 6);
}

}  // namespace
}  // namespace prefixd::testing
