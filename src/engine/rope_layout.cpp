#include "engine/rope_layout.h"

#include <algorithm>
#include <cstring>

namespace prefixd::engine::detail {
namespace {

constexpr std::uint64_t kLayoutMagic = 0x31594c5045504f52ull;  // "ROPEPLY1", little-endian
constexpr std::size_t kImageBytes = 4 * sizeof(std::int32_t);
constexpr std::size_t kTrailerBytes = sizeof(std::uint32_t) + sizeof(std::uint64_t);

template <typename T>
void put(Bytes& out, T value) {
  std::uint8_t raw[sizeof(T)];
  for (std::size_t i = 0; i < sizeof(T); ++i) raw[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(value) >> (8 * i));
  out.insert(out.end(), raw, raw + sizeof(T));
}

template <typename T>
T get(std::span<const std::uint8_t> in, std::size_t at) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<std::uint64_t>(in[at + i]) << (8 * i);
  return static_cast<T>(value);
}

}  // namespace

Pos RopeLayout::t_of(Pos index) const {
  Pos shift = 0;  // positions the images before `index` did not advance
  for (const RopeImage& image : images_) {
    if (index < image.begin) break;
    if (index < image.begin + image.n_tokens) return image.begin - shift;
    shift += image.n_tokens - image.n_pos;
  }
  return index - shift;
}

Pos RopeLayout::index_of(Pos t, bool last) const {
  if (t < 0) return t;
  Pos shift = 0;
  for (const RopeImage& image : images_) {
    const Pos image_t = image.begin - shift;
    if (t < image_t) break;
    if (t == image_t) return last ? image.begin + std::max(image.held, 1) - 1 : image.begin;
    shift += image.n_tokens - image.n_pos;
  }
  return t + shift;
}

void RopeLayout::place(RopeImage image) {
  std::erase_if(images_, [&](const RopeImage& other) { return other.begin >= image.begin; });
  images_.push_back(image);
}

void RopeLayout::cut(Pos from) {
  std::erase_if(images_, [&](const RopeImage& image) { return image.begin + image.n_tokens > from; });
}

void RopeLayout::copy_from(const RopeLayout& source, Pos p1) {
  if (&source == this) return;
  images_.clear();
  for (const RopeImage& image : source.images_) {
    if (p1 >= 0 && image.begin + image.n_tokens > p1) break;
    images_.push_back(image);
  }
}

void RopeLayout::append_to(Bytes& state) const {
  state.reserve(state.size() + images_.size() * kImageBytes + kTrailerBytes);
  for (const RopeImage& image : images_) {
    put(state, image.begin);
    put(state, image.n_tokens);
    put(state, image.n_pos);
    put(state, image.held);
  }
  put(state, static_cast<std::uint32_t>(images_.size()));
  put(state, kLayoutMagic);
}

std::optional<RopeLayout::Read> RopeLayout::read_from(std::span<const std::uint8_t> state) {
  if (state.size() < kTrailerBytes || get<std::uint64_t>(state, state.size() - sizeof(std::uint64_t)) != kLayoutMagic) {
    return std::nullopt;
  }
  const auto count = get<std::uint32_t>(state, state.size() - kTrailerBytes);
  const std::size_t body = state.size() - kTrailerBytes;
  if (count > body / kImageBytes) return std::nullopt;
  Read out;
  out.inner_size = body - count * kImageBytes;
  Pos end = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t at = out.inner_size + i * kImageBytes;
    RopeImage image{get<std::int32_t>(state, at), get<std::int32_t>(state, at + 4), get<std::int32_t>(state, at + 8),
                    get<std::int32_t>(state, at + 12)};
    // Sorted, apart, and each one a real image: anything else is not a layout this engine wrote.
    if (image.begin < end || image.n_tokens <= 0 || image.n_pos <= 0 || image.n_pos > image.n_tokens ||
        image.held < 0 || image.held > image.n_tokens) {
      return std::nullopt;
    }
    end = image.begin + image.n_tokens;
    out.images.push_back(image);
  }
  return out;
}

}  // namespace prefixd::engine::detail
