// prefixd engine — where a sequence's tokens sit in M-RoPE's positions.
//
// Everything above the engine numbers a sequence's cells by their index in the prompt: the cells
// of [0, n) are the prompt's first n tokens. With M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5)
// an image does not advance the position one per token: all its cells sit at one temporal
// position t (their rows and columns are two more components), and the text after it resumes
// max(rows, columns) positions later. libllama keys cells by t. A RopeLayout is the map between
// the two numberings for one sequence: the images it holds, in index order.
//
// Invariants: images are sorted by `begin` and do not overlap; t is non-decreasing in the index,
// strictly increasing outside images, and no text token shares a t with an image. So a range of
// indices [p0, p1) maps to the range of t [t(p0), t(p1)), and an image falls wholly inside or
// outside it: inside exactly when p0 < its end <= p1 — an image is held whole, at its last index,
// or not at all. (A prompt is never resumed strictly inside an image: the cache's unbroken spans.)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/types.h"

namespace prefixd::engine::detail {

// One image's place in a sequence.
struct RopeImage {
  Pos begin = 0;             // index of its first token
  std::int32_t n_tokens = 0;  // its cells, all at one t
  std::int32_t n_pos = 0;     // positions it advances the text after it (<= n_tokens)
  std::int32_t held = 0;      // its rows the sequence holds, [begin, begin + held)
  friend bool operator==(const RopeImage&, const RopeImage&) = default;
};

class RopeLayout {
 public:
  // The t of the token at `index` (an image's tokens: the image's t).
  Pos t_of(Pos index) const;
  // The index of the first (or last) held cell at `t`: a text token's own index, an image's first
  // row or its last held one.
  Pos index_of(Pos t, bool last) const;
  // Records an image whose rows [begin, begin + rows_held) the sequence now holds; images at or
  // after its begin are forgotten first (they were other content).
  void place(RopeImage image);
  // The sequence lost every cell at an index >= `from`: images that end after it go (their cells
  // share the t of their first row).
  void cut(Pos from);
  // The images of `source` that a copy of [.., p1) takes (p1 < 0: all): those ending at or before p1.
  void copy_from(const RopeLayout& source, Pos p1);
  void clear() { images_.clear(); }
  bool empty() const { return images_.empty(); }
  std::span<const RopeImage> images() const { return images_; }

  // A sequence's saved state carries its layout after libllama's bytes: the images, their count
  // and a magic number last, so that the state is read back from its end.
  void append_to(Bytes& state) const;
  // The layout at the end of `state`, and how many bytes precede it; nullopt when `state` does
  // not end with a well-formed layout.
  struct Read {
    std::size_t inner_size = 0;
    std::vector<RopeImage> images;
  };
  static std::optional<Read> read_from(std::span<const std::uint8_t> state);
  void assign(std::vector<RopeImage> images) { images_ = std::move(images); }

 private:
  std::vector<RopeImage> images_;
};

}  // namespace prefixd::engine::detail
