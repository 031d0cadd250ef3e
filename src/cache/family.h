// prefixd cache — a model family as the cache sees it, described once when the model loads: how
// a prompt of it may be resumed (from any prefix of cells, or only where a whole state is kept),
// whether it keeps attention cells that the host, disk and shared tiers store by position,
// whether only a window of those cells survives, and the sources (source.h) a prompt resumes from,
// in the order that breaks ties. Every component asks this description; none asks the model's
// family itself.
#pragma once

#include <cstdint>
#include <span>

#include "cache/cache_types.h"
#include "engine/types.h"

namespace prefixd::cache {

// A place a prefix can be resumed from.
enum class Source : std::uint8_t {
  // Trim families (the memory can be cut back to any position: dense, and sliding-window models
  // with the full window cache): any prefix of cells.
  device,   // a device entry's cells (a copy within the context)
  running,  // the cells another running request has computed (a copy within the context)
  host,     // host-tier segments, with the disk's files promoted into it first (a restore)
  // Checkpoint families (recurrent, hybrid, window-only sliding-window): an exact state only.
  entry_state,  // a device entry whose holder keeps the state after exactly its tokens
  checkpoint,   // a saved state, with the attention cells before it from device, running or host
  window,       // window-only models: a device entry whose window before the match is unbroken
};

const char* source_name(Source source);

struct Family {
  ReuseMode mode = ReuseMode::trim;
  // Some layers keep attention K/V cells (all but a pure recurrent model): cells are shared
  // between sequences and stored below the device by position.
  bool attention_cells = true;
  // A sliding-window model, and whether only its window's cells are kept (no full window cache:
  // then it is a checkpoint family).
  bool sliding = false;
  bool window_only = false;
  std::int32_t sliding_window = 0;
  // One pool of cells (engine::ModelInfo::cells_shared): a copy between sequences shares cells.
  // False with a stream per sequence: a copy duplicates the source's cells from its first
  // position, so the tiers keep a sequence's prefix in one piece (a host segment is a whole
  // sequence: resolve() in prefix_cache_impl.h) and nothing swaps cells it holds for equal ones.
  bool shares_cells = true;

  static Family of(const engine::ModelInfo& model);

  bool trimmable() const { return mode == ReuseMode::trim; }
  // The sources a prompt resumes from, cheapest first: cells already in the context before a
  // restore; for checkpoint families a kept state (an entry's end, then a checkpoint) before
  // rebuilding the window from an entry's cells, which also copies cells the state does not need.
  std::span<const Source> sources() const;
  // Whether a request may wait for an older running request that is computing a longer prefix
  // (trim families: the cells it computes are final as they land; a state is not until its end).
  bool waits_for_running() const { return trimmable(); }
  // Whether the entries may be rewritten from cell 0 when idle (a saved state of a cut-back
  // sequence would be wrong for the others).
  bool compactable() const { return trimmable() && shares_cells; }
  // Whether cached cells may be moved to other positions (--cache-reuse): every cell is attention
  // K/V and stays where it was written (dense, or a sliding window with its full cache; a
  // window-only cache drops the cells a chunk may need). The engine also has to be able to shift.
  bool shiftable() const { return trimmable() && shares_cells; }
};

}  // namespace prefixd::cache
