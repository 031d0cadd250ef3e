// A run's raw results file: written compressed when its name ends in .zst, read back either way,
// and a damaged file is an error, never a half-read run.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bench/results_file.h"

namespace prefixd::bench {
namespace {

namespace fs = std::filesystem;

struct ResultsFile : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("prefixd-results-file-" + std::to_string(::getpid()));
  nlohmann::json run = [] {
    nlohmann::json r = {{"workloads", nlohmann::json::array()}, {"seconds", 12.5}};
    for (int i = 0; i < 200; ++i) {
      r["workloads"].push_back({{"name", "resend"}, {"evaluated", 1000 + i}, {"reply", "the same words again"}});
    }
    return r;
  }();
  ResultsFile() { fs::create_directories(dir); }
  ~ResultsFile() override { fs::remove_all(dir); }
};

TEST_F(ResultsFile, ACompressedRunReadsBackEqualAndIsSmaller) {
  write_results(dir / "run.json", run);
  write_results(dir / results_file_name("run"), run);
  EXPECT_EQ(results_file_name("run"), "run.json.zst");
  EXPECT_EQ(read_results(dir / "run.json"), run);
  EXPECT_EQ(read_results(dir / "run.json.zst"), run);
  EXPECT_LT(fs::file_size(dir / "run.json.zst") * 10, fs::file_size(dir / "run.json"));
}

TEST_F(ResultsFile, TheRunsNameDropsBothSuffixes) {
  EXPECT_EQ(results_stem("bench/results/2026-12-01-vm.json.zst"), "2026-12-01-vm");
  EXPECT_EQ(results_stem("2026-12-01-vm.json"), "2026-12-01-vm");
  EXPECT_EQ(results_stem("plain"), "plain");
}

TEST_F(ResultsFile, ADamagedOrMissingFileIsAnError) {
  write_results(dir / "run.json.zst", run);
  const auto size = fs::file_size(dir / "run.json.zst");
  fs::resize_file(dir / "run.json.zst", size / 2);
  EXPECT_THROW(read_results(dir / "run.json.zst"), std::runtime_error) << "cut short";
  std::ofstream(dir / "text.json.zst") << "{\"not\": \"compressed\"}";
  EXPECT_THROW(read_results(dir / "text.json.zst"), std::runtime_error) << "not a zstd frame";
  EXPECT_THROW(read_results(dir / "missing.json.zst"), std::runtime_error);
}

}  // namespace
}  // namespace prefixd::bench
