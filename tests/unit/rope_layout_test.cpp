// The map between token indices and M-RoPE positions (src/engine/rope_layout.h): what libllama
// keys each cell by, how ranges of indices fall on images, and the layout a saved state carries.
#include <gtest/gtest.h>

#include "engine/rope_layout.h"

namespace prefixd::engine::detail {
namespace {

// Text [0, 10), an image of 12 tokens (4 x 3 grid: 4 positions) at [10, 22), text [22, 30), an
// image of 6 tokens (3 positions) at [30, 36), text after.
RopeLayout two_images() {
  RopeLayout layout;
  layout.place({.begin = 10, .n_tokens = 12, .n_pos = 4, .held = 12});
  layout.place({.begin = 30, .n_tokens = 6, .n_pos = 3, .held = 6});
  return layout;
}

TEST(RopeLayout, TextBeforeTheFirstImageKeepsItsIndexAndTextAfterAnImageResumesItsPositionsLater) {
  const RopeLayout layout = two_images();
  EXPECT_EQ(layout.t_of(0), 0);
  EXPECT_EQ(layout.t_of(9), 9);
  for (Pos i = 10; i < 22; ++i) EXPECT_EQ(layout.t_of(i), 10) << i;  // every image token at the image's t
  EXPECT_EQ(layout.t_of(22), 14);                                     // 10 + 4 positions
  EXPECT_EQ(layout.t_of(29), 21);
  for (Pos i = 30; i < 36; ++i) EXPECT_EQ(layout.t_of(i), 22) << i;
  EXPECT_EQ(layout.t_of(36), 25);
  EXPECT_EQ(layout.t_of(100), 89);
  EXPECT_EQ(RopeLayout{}.t_of(57), 57);
}

TEST(RopeLayout, IndexOfIsTheInverseOnHeldCells) {
  const RopeLayout layout = two_images();
  for (const Pos i : {0, 9, 22, 29, 36, 100}) {
    EXPECT_EQ(layout.index_of(layout.t_of(i), false), i) << i;
    EXPECT_EQ(layout.index_of(layout.t_of(i), true), i) << i;
  }
  EXPECT_EQ(layout.index_of(10, false), 10);  // an image: its first row, or its last held one
  EXPECT_EQ(layout.index_of(10, true), 21);
  EXPECT_EQ(layout.index_of(22, true), 35);
  EXPECT_EQ(layout.index_of(-1, true), -1);  // an empty sequence
  RopeLayout partial;
  partial.place({.begin = 4, .n_tokens = 12, .n_pos = 4, .held = 5});
  EXPECT_EQ(partial.index_of(4, true), 8);
}

TEST(RopeLayout, ACutDropsEveryImageThatEndsAfterItAndACopyTakesTheImagesThatEndWithinIt) {
  RopeLayout layout = two_images();
  layout.cut(36);
  EXPECT_EQ(layout.images().size(), 2u);
  layout.cut(35);  // inside the second image: its cells all share a t, so it goes whole
  ASSERT_EQ(layout.images().size(), 1u);
  EXPECT_EQ(layout.t_of(30), 22);  // text-like again: nothing is placed there now
  layout.cut(0);
  EXPECT_TRUE(layout.empty());

  RopeLayout copy;
  copy.copy_from(two_images(), 30);
  EXPECT_EQ(copy.images().size(), 1u);
  copy.copy_from(two_images(), 21);  // ends inside the first image: the range holds none of it
  EXPECT_TRUE(copy.empty());
  copy.copy_from(two_images(), -1);
  EXPECT_EQ(copy.images().size(), 2u);
}

TEST(RopeLayout, PlacingAnImageForgetsTheImagesAtOrAfterIt) {
  RopeLayout layout = two_images();
  layout.place({.begin = 10, .n_tokens = 8, .n_pos = 4, .held = 3});
  ASSERT_EQ(layout.images().size(), 1u);
  EXPECT_EQ(layout.images()[0].held, 3);
  EXPECT_EQ(layout.t_of(18), 14);
}

TEST(RopeLayout, AStateCarriesItsLayoutAfterTheEngineBytesAndAnythingElseIsRefused) {
  Bytes state = {1, 2, 3, 4, 5};
  two_images().append_to(state);
  const auto read = RopeLayout::read_from(state);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->inner_size, 5u);
  EXPECT_EQ(read->images.size(), 2u);
  EXPECT_EQ(read->images[1], (RopeImage{.begin = 30, .n_tokens = 6, .n_pos = 3, .held = 6}));

  Bytes empty_layout = {9, 9};
  RopeLayout{}.append_to(empty_layout);
  ASSERT_TRUE(RopeLayout::read_from(empty_layout).has_value());
  EXPECT_EQ(RopeLayout::read_from(empty_layout)->inner_size, 2u);

  EXPECT_FALSE(RopeLayout::read_from(Bytes{1, 2, 3}).has_value());              // too short
  EXPECT_FALSE(RopeLayout::read_from(Bytes(64, 0)).has_value());                // no magic
  Bytes damaged = state;
  damaged[damaged.size() - 12] = 200;  // the count: more images than bytes
  EXPECT_FALSE(RopeLayout::read_from(damaged).has_value());
  Bytes unsorted = {};
  RopeLayout reversed;
  reversed.assign({{.begin = 30, .n_tokens = 6, .n_pos = 3, .held = 6}, {.begin = 10, .n_tokens = 12, .n_pos = 4, .held = 12}});
  reversed.append_to(unsorted);
  EXPECT_FALSE(RopeLayout::read_from(unsorted).has_value());
}

}  // namespace
}  // namespace prefixd::engine::detail
