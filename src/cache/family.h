// prefixd cache — a model family as the cache and the scheduler see it: one policy object per
// family, built once when the model loads (Family::of), that answers every question whose answer
// depends on how the family's memory behaves — which prefixes it can resume and from where, what
// the host, disk and shared tiers store of it, how a sliding window limits what a cut keeps, how
// a draft is rolled back, whether its cells may be compacted or shifted. Every component asks this
// object; none asks the model's family itself (engine::ModelFamily is read in Family::of alone).
//
// The families (family.cpp), in the way each kind of memory gets its own manager:
//   DenseFamily          full attention: any prefix of cells, cut back anywhere.
//   FullWindowFamily     sliding-window layers with libllama's full window cache: as dense, but a
//                        decode may take over cells below a window, so an entry must still hold
//                        its first cell to be trusted.
//   WindowOnlyFamily     sliding-window layers that keep only the window: resumed at kept states
//                        (an entry's end, a checkpoint, or an entry whose window before the match
//                        is unbroken).
//   RecurrentFamily      a fixed-size state per sequence and no attention cells: kept states only.
//   HybridFamily         attention cells beside a recurrent state: kept states, with the attention
//                        cells before them from any tier.
// Adding a family is one class here and one line in Family::of.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "cache/cache_types.h"
#include "engine/types.h"

namespace prefixd::cache {

// A place a prefix can be resumed from.
enum class Source : std::uint8_t {
  // Trim families (the memory can be cut back to any position): any prefix of cells.
  device,   // a device entry's cells (a copy within the context)
  running,  // the cells another running request has computed (a copy within the context)
  host,     // host-tier segments, with the disk's files promoted into it first (a restore)
  // Checkpoint families: an exact state only.
  entry_state,  // a device entry whose holder keeps the state after exactly its tokens
  checkpoint,   // a saved state, with the attention cells before it from device, running or host
  window,       // window-only models: a device entry whose window before the match is unbroken
};

const char* source_name(Source source);

// How a speculative draft that was not accepted leaves a sequence.
enum class DraftRollback : std::uint8_t {
  cut,         // its cells are cut from the sequence's end (attention cells, windowed or not)
  checkpoint,  // the state before it is restored (a recurrent state has consumed the draft)
};

class Family {
 public:
  // The family of a loaded model, with its KV layout (ModelInfo::cells_shared).
  static std::unique_ptr<const Family> of(const engine::ModelInfo& model);
  virtual ~Family() = default;
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  virtual std::string_view name() const = 0;  // as engine::family_name, window-only apart

  // --- What can be resumed, and from where.
  // trim: any prefix of cells; checkpoints: only where a whole state is kept.
  virtual ReuseMode mode() const = 0;
  bool trimmable() const { return mode() == ReuseMode::trim; }
  // Some layers keep attention K/V cells: cells are shared between sequences, stored below the
  // device by position, and an entry without its state can still give them (all but recurrent).
  virtual bool keeps_cells() const { return true; }
  // The sources a prompt resumes from, cheapest first (ties broken in this order).
  virtual std::span<const Source> sources() const = 0;
  // Whether a request may wait for an older running request that is computing a longer prefix:
  // the cells it computes are final as they land (a state is not until its end).
  virtual bool waits_for_running() const { return trimmable(); }
  // Whether a prompt's turn boundaries are worth a checkpoint each (the prompt builder marks them):
  // a family resumed only at kept states resumes a conversation at its last turn that way.
  bool checkpoints_at_turns() const { return !trimmable(); }

  // --- The sliding window.
  // The window in tokens; 0 without sliding-window layers.
  virtual std::int32_t window() const { return 0; }
  // Only the window's cells survive a sequence's progress (no full window cache): an entry's state
  // at its end holds while its unbroken window run reaches back far enough.
  virtual bool keeps_only_window() const { return false; }
  // A decode may take over an entry's cells below its window even with the full window cache: an
  // entry is trusted only while its holder still has its first cell (DeviceTier::holds_its_start).
  virtual bool may_lose_start() const { return false; }
  // The first position whose cells the state after `end` positions still attends to.
  engine::Pos window_start(engine::Pos end) const;
  // Whether a holder whose unbroken window run starts at `run_from` still has the whole window of
  // its state after `end` positions (always, without a window cut).
  bool window_intact(engine::Pos run_from, engine::Pos end) const;

  // --- What the tiers may do with the cells.
  // Whether the entries may be rewritten from cell 0 when idle (a saved state of a cut-back
  // sequence would be wrong for the others; a stream per sequence has nothing to compact).
  bool compactable() const { return trimmable() && shares_cells_; }
  // Whether cached cells may be moved to other positions (--cache-reuse): every cell is attention
  // K/V and stays where it was written (the engine also has to be able to shift).
  bool shiftable() const { return trimmable() && shares_cells_; }
  // When a model of this family cannot shift: what its user can do instead (serve's refusal).
  virtual std::string_view shift_remedy() const {
    return "its memory is recurrent, hybrid or M-RoPE; run it without --cache-reuse";
  }
  // One pool of cells (engine::ModelInfo::cells_shared): a copy between sequences shares cells.
  // False with a stream per sequence: a copy duplicates the source's cells from its first
  // position, so the tiers keep a sequence's prefix in one piece (a host segment is a whole
  // sequence: resolve() in prefix_cache_impl.h) and nothing swaps cells it holds for equal ones.
  bool shares_cells() const { return shares_cells_; }

  // --- Speculative decoding (the scheduler's drafting code).
  virtual DraftRollback draft_rollback() const { return DraftRollback::cut; }
  // Whether a model of this family can be the draft model: its lanes are cut back after each
  // verification like the target's sequences.
  virtual bool can_draft() const { return false; }

 protected:
  explicit Family(bool shares_cells) : shares_cells_(shares_cells) {}

 private:
  bool shares_cells_;
};

}  // namespace prefixd::cache
