#include "models/model_catalog.h"

#include <algorithm>
#include <format>
#include <map>
#include <stdexcept>

namespace prefixd::models {
namespace {

bool is_gguf(const std::filesystem::directory_entry& e) {
  return e.is_regular_file() && e.path().extension() == ".gguf";
}

bool is_projector(const std::filesystem::path& p) { return p.filename().string().find("mmproj") != std::string::npos; }

std::uint64_t size_of(const std::filesystem::path& p) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(p, ec);
  return ec ? 0 : n;
}

}  // namespace

std::vector<CatalogModel> scan_models_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw std::runtime_error(std::format("--models-dir: no folder at '{}'", dir.string()));
  std::map<std::string, CatalogModel> found;
  const auto add = [&](CatalogModel model) {
    if (found.contains(model.id)) {
      throw std::runtime_error(std::format("--models-dir {}: two models are named '{}' ({} and {})", dir.string(),
                                           model.id, found[model.id].file.string(), model.file.string()));
    }
    found.emplace(model.id, std::move(model));
  };
  std::vector<std::filesystem::directory_entry> entries(std::filesystem::directory_iterator(dir), {});
  std::ranges::sort(entries, {}, [](const auto& e) { return e.path(); });
  for (const auto& entry : entries) {
    if (is_gguf(entry) && !is_projector(entry.path())) {
      add(CatalogModel{.id = entry.path().stem().string(), .file = entry.path(), .bytes = size_of(entry.path())});
    } else if (entry.is_directory()) {
      std::vector<std::filesystem::path> files;
      std::filesystem::path projector;
      for (const auto& inner : std::filesystem::directory_iterator(entry.path())) {
        if (!is_gguf(inner)) continue;
        if (is_projector(inner.path())) {
          projector = inner.path();
        } else {
          files.push_back(inner.path());
        }
      }
      if (files.empty()) continue;
      if (files.size() > 1) {
        std::ranges::sort(files);
        throw std::runtime_error(std::format("--models-dir {}: folder '{}' holds {} model files ({}, {}...): one "
                                             "model per folder", dir.string(), entry.path().filename().string(),
                                             files.size(), files[0].filename().string(), files[1].filename().string()));
      }
      add(CatalogModel{.id = entry.path().filename().string(), .file = files[0], .projector = projector,
                       .bytes = size_of(files[0]) + (projector.empty() ? 0 : size_of(projector))});
    }
  }
  if (found.empty()) throw std::runtime_error(std::format("--models-dir {}: no model (.gguf) in it", dir.string()));
  std::vector<CatalogModel> out;
  for (auto& [id, model] : found) out.push_back(std::move(model));
  return out;
}

}  // namespace prefixd::models
