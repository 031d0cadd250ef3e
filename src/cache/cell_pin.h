// prefixd cache — the full window cache's pin (ModelInfo::window_pin): sequence ids `pin` and
// `pin + 1` co-own every cell the cache relies on.
//
// libllama lets a decode or a restore take over a cell only when ONE sequence owns it and it lies
// behind that owner's window, and then drops every cell of that owner below it. A cell both pin
// sequences cover always has two owners, so neither the cell nor the pin is ever taken over. (With
// one pin sequence, the cells a holder gave up were the pin's alone until the next rebuild; a
// restore that took one over dropped the pin below it, and with it the cover of every running
// prefix: measured as a 461-token host restore left holding positions 190 to 460 only.)
#pragma once

#include "engine/engine.h"

namespace prefixd::cache {

// Covers `src`'s cells in [p0, p1) with the pin; nothing when `pin` < 0 (no pin).
inline void pin_cells(engine::Engine& engine, engine::SeqId pin, engine::SeqId src, engine::Pos p0, engine::Pos p1) {
  if (pin < 0) return;
  engine.copy_sequence(src, pin, p0, p1);
  engine.copy_sequence(src, pin + 1, p0, p1);
}

// Takes the pin off every cell (cells nobody else owns are freed).
inline void unpin_all(engine::Engine& engine, engine::SeqId pin) {
  if (pin < 0) return;
  engine.remove_sequence(pin, 0, -1);
  engine.remove_sequence(pin + 1, 0, -1);
}

}  // namespace prefixd::cache
