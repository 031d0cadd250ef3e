// prefixd models — which models a multi-model server (`prefixd serve --models-dir DIR`) offers.
//
// Every GGUF file directly in DIR is a model named by its file name without `.gguf`; a folder in
// DIR holding one model GGUF is a model named by the folder, with the folder's GGUF whose name
// holds "mmproj" as its vision or audio projector. Other names holding "mmproj" are projectors,
// never models. Names must be unique (a file `a.gguf` beside a folder `a` is refused).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace prefixd::models {

struct CatalogModel {
  std::string id;
  std::filesystem::path file;
  std::filesystem::path projector;  // empty: none
  std::uint64_t bytes = 0;          // the model's and its projector's file sizes
};

// The models of `dir`, by id. Throws std::runtime_error naming the problem (no such folder, no
// model in it, two models of one name, a folder with several model files).
std::vector<CatalogModel> scan_models_dir(const std::filesystem::path& dir);

}  // namespace prefixd::models
