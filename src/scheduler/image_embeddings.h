// prefixd scheduler — image embeddings kept by digest: a prompt that must compute the positions of
// an image again (its K/V was evicted, or another prompt holds the same image elsewhere) takes the
// projector's output from here instead of running the vision encoder. Least recently used first
// out, within a byte budget. Used on the scheduler thread only.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <vector>

#include "engine/vision.h"

namespace prefixd::scheduler {

class ImageEmbeddings {
 public:
  explicit ImageEmbeddings(std::uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  struct Got {
    std::shared_ptr<const std::vector<float>> rows;
    bool reused = false;  // kept from an earlier encode
  };
  // The embeddings of `image`: kept ones, else `vision` encodes them now and they are kept (when
  // they fit the budget at all). Throws engine::ImageError when the encoder fails.
  Got get(engine::Vision& vision, const engine::PreparedImage& image);

  std::int64_t count() const { return static_cast<std::int64_t>(order_.size()); }
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t capacity_bytes() const { return capacity_bytes_; }

 private:
  struct Kept {
    engine::ImageDigest digest;
    std::shared_ptr<const std::vector<float>> rows;
  };
  static std::uint64_t size_of(const Kept& kept) { return kept.rows->size() * sizeof(float); }

  std::uint64_t capacity_bytes_;
  std::uint64_t bytes_ = 0;
  std::list<Kept> order_;  // most recently used first
  std::map<engine::ImageDigest, std::list<Kept>::iterator> by_digest_;
};

}  // namespace prefixd::scheduler
