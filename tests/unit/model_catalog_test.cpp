// The models of a --models-dir folder (models/model_catalog.h) and the labelling of each model's
// metrics (models/model_host.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "models/model_catalog.h"
#include "models/model_host.h"

namespace prefixd::models {
namespace {

struct Folder {
  Folder() : path(std::filesystem::temp_directory_path() / ("prefixd-catalog-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Folder() { std::filesystem::remove_all(path); }
  void file(const std::string& name, std::size_t bytes = 10) {
    std::filesystem::create_directories((path / name).parent_path());
    std::ofstream(path / name) << std::string(bytes, 'x');
  }
  std::filesystem::path path;
};

TEST(ModelCatalog, FilesAndFoldersAreModelsAndProjectorsGoWithTheirFolder) {
  Folder f;
  f.file("b.gguf", 100);
  f.file("a.gguf", 50);
  f.file("mmproj-a.gguf");  // a projector at the top: no model
  f.file("notes.txt");
  f.file("vision/model-q8.gguf", 70);
  f.file("vision/mmproj-f16.gguf", 30);
  f.file("empty/readme.md");
  const auto models = scan_models_dir(f.path);
  ASSERT_EQ(models.size(), 3u);
  EXPECT_EQ(models[0].id, "a");
  EXPECT_EQ(models[0].bytes, 50u);
  EXPECT_TRUE(models[0].projector.empty());
  EXPECT_EQ(models[1].id, "b");
  EXPECT_EQ(models[2].id, "vision");
  EXPECT_EQ(models[2].file.filename(), "model-q8.gguf");
  EXPECT_EQ(models[2].projector.filename(), "mmproj-f16.gguf");
  EXPECT_EQ(models[2].bytes, 100u) << "the model and its projector";
}

TEST(ModelCatalog, AmbiguousOrEmptyFoldersAreRefusedNamingThem) {
  {
    Folder f;
    f.file("a.gguf");
    f.file("a/model.gguf");
    EXPECT_THROW(
        {
          try {
            scan_models_dir(f.path);
          } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find("two models are named 'a'"), std::string::npos) << e.what();
            throw;
          }
        },
        std::runtime_error);
  }
  {
    Folder f;
    f.file("x/one.gguf");
    f.file("x/two.gguf");
    try {
      scan_models_dir(f.path);
      ADD_FAILURE() << "two model files in one folder";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("folder 'x' holds 2 model files"), std::string::npos) << e.what();
    }
  }
  {
    Folder f;
    f.file("mmproj.gguf");
    EXPECT_THROW(scan_models_dir(f.path), std::runtime_error) << "no model";
  }
  EXPECT_THROW(scan_models_dir("/nonexistent/folder"), std::runtime_error);
}

TEST(ModelMetrics, EverySampleTakesTheModelLabelAndFamiliesAreAnnouncedOnce) {
  std::vector<std::string> seen;
  const std::string a = label_metrics("# HELP x_total X.\n# TYPE x_total counter\nx_total 3\ny{kind=\"a\"} 1\ny{} 2\n",
                                      "model=\"a\"", seen);
  EXPECT_EQ(a, "# HELP x_total X.\n# TYPE x_total counter\nx_total{model=\"a\"} 3\ny{model=\"a\",kind=\"a\"} 1\n"
               "y{model=\"a\"} 2\n");
  const std::string b = label_metrics("# HELP x_total X.\n# TYPE x_total counter\nx_total 4\n", "model=\"b\"", seen);
  EXPECT_EQ(b, "x_total{model=\"b\"} 4\n") << "HELP and TYPE once over every model";
}

}  // namespace
}  // namespace prefixd::models
