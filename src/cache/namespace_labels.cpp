#include "cache/namespace_labels.h"

#include <fstream>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

#include "util/hex.h"

namespace prefixd::cache {

NamespaceLabels::NamespaceLabels(std::filesystem::path file) : file_(std::move(file)) {
  if (file_.empty()) return;
  std::ifstream in(file_);
  std::string line;
  while (labels_.size() < kMaxLabels && std::getline(in, line)) {
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || space + 1 == line.size()) continue;
    Digest root{};
    if (util::from_hex(std::string_view(line).substr(0, space), root)) labels_.try_emplace(root, line.substr(space + 1));
  }
}

void NamespaceLabels::add(const Digest& root, const std::string& label) {
  if (label.empty() || labels_.contains(root)) return;
  if (labels_.size() >= kMaxLabels) {
    if (!std::exchange(warned_full_, true)) {
      spdlog::warn("cache: {} namespaces under LoRA adapters are labelled, the most kept; KV events of newer ones "
                   "carry no lora_name",
                   kMaxLabels);
    }
    return;
  }
  labels_.emplace(root, label);
  if (file_.empty() || label.find_first_of("\r\n") != std::string::npos) return;
  std::ofstream out(file_, std::ios::app);
  out << to_hex(root) << ' ' << label << '\n';
  if (!out) spdlog::warn("cache: cannot keep the label of a LoRA namespace in {}", file_.string());
}

std::string NamespaceLabels::find(const Digest& root) const {
  const auto found = labels_.find(root);
  return found == labels_.end() ? std::string() : found->second;
}

}  // namespace prefixd::cache
