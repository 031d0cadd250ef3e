// Sequence states of models whose sliding-window layers keep every cell (libllama's swa_full).
// Internal to src/engine/.
//
// libllama saves a sequence's window-layer cells only where they are inside the window of the
// sequence's last position: a state of positions [0, 256) with a 64-token window carries the
// full-attention cells of all 256 positions but the window cells of 192 to 255 only. A prefix
// restored from such states has no window cells below each state's last window, so it cannot be
// cut back or extended from inside a state, as the prompt cache does with any other trimmable
// sequence. States saved here are made of pieces no longer than half a window, aligned to
// multiples of that length (also inside the chunks of chunked attention), so that no cell of a
// piece is outside its window; a restore loads each piece into a spare sequence and copies it.
// While it does, a guard sequence co-owns the cells restored so far: libllama lets a new cell take
// over one that a single sequence owns once it is outside that sequence's window.
#pragma once

#include <cstdint>
#include <span>

#include <llama.h>

#include "engine/types.h"

namespace prefixd::engine::detail {

class WindowStates {
 public:
  // `spare` and `guard` are sequence ids nobody else uses between calls; `window` is the model's.
  WindowStates(llama_context* ctx, SeqId spare, SeqId guard, std::int32_t window);

  // Every cell of `seq`, in pieces. Empty when `seq` holds nothing.
  Bytes save(SeqId seq) const;
  // Whether `state` was made by save() (else it is one libllama state).
  static bool is_pieces(std::span<const std::uint8_t> state);
  // Replaces what `dst` holds with `state`; false (and `dst` empty) when a piece is refused.
  bool restore(std::span<const std::uint8_t> state, SeqId dst) const;

 private:
  llama_memory_t memory() const { return llama_get_memory(ctx_); }

  llama_context* ctx_;
  SeqId spare_;
  SeqId guard_;
  std::int32_t piece_;
};

}  // namespace prefixd::engine::detail
