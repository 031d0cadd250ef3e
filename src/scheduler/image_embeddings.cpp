#include "scheduler/image_embeddings.h"

namespace prefixd::scheduler {

ImageEmbeddings::Got ImageEmbeddings::get(engine::Vision& vision, const engine::PreparedImage& image) {
  if (const auto found = by_digest_.find(image.digest); found != by_digest_.end()) {
    order_.splice(order_.begin(), order_, found->second);
    return Got{found->second->rows, true};
  }
  auto rows = std::make_shared<const std::vector<float>>(vision.encode(image));
  const Kept kept{image.digest, rows};
  if (size_of(kept) > capacity_bytes_) return Got{rows, false};
  while (bytes_ + size_of(kept) > capacity_bytes_ && !order_.empty()) {
    bytes_ -= size_of(order_.back());
    by_digest_.erase(order_.back().digest);
    order_.pop_back();
  }
  order_.push_front(kept);
  by_digest_[image.digest] = order_.begin();
  bytes_ += size_of(kept);
  return Got{rows, false};
}

}  // namespace prefixd::scheduler
