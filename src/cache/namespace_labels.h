// prefixd cache — the labels of namespaces whose K/V is computed under LoRA adapters
// (RequestKey::adapter, e.g. "tiny-lora-a@0.5+tiny-lora-b"), by the namespace's root digest: KV
// events name the adapters of a namespace's blocks from here (HoldingsSummary).
//
// With a disk tier they are kept in DIR/labels beside the record files, one line
// "<root digest, 64 hex digits> <label>" each, appended when a label is learned and read when the
// store opens: segments read from disk after a restart keep their adapters' names before any
// request under those adapters comes again. A line that does not parse is skipped; a label with a
// line break is kept in memory only.
//
// Invariant: at most kMaxLabels labels (a request may name its own adapter scales, each a
// namespace); past that, new namespaces go unlabelled and a warning says so once.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <unordered_map>

#include "cache/block_hash.h"

namespace prefixd::cache {

class NamespaceLabels {
 public:
  static constexpr std::size_t kMaxLabels = 65'536;

  // `file` empty: in memory only. Otherwise its labels are read now (a missing file is none).
  explicit NamespaceLabels(std::filesystem::path file);

  // Labels namespace `root`. The first label of a root stays (a root is one adapter set).
  void add(const Digest& root, const std::string& label);
  // The label of `root`; empty when none is known.
  std::string find(const Digest& root) const;
  bool empty() const { return labels_.empty(); }
  std::size_t size() const { return labels_.size(); }

 private:
  std::filesystem::path file_;
  std::unordered_map<Digest, std::string, DigestHash> labels_;
  bool warned_full_ = false;
};

}  // namespace prefixd::cache
