#include "cache/family.h"

#include <algorithm>
#include <array>

namespace prefixd::cache {
namespace {

constexpr std::array kTrimSources = {Source::device, Source::running, Source::host};
// A kept state (an entry's end, then a checkpoint) before rebuilding the window from an entry's
// cells, which also copies cells the state does not need.
constexpr std::array kCheckpointSources = {Source::entry_state, Source::checkpoint, Source::window};
// Without a window source: recurrent and hybrid models, and any family with a stream per
// sequence, which copies a sequence as its saved state — holding only the window of its last
// position, so an entry's window before an earlier match cannot be copied out of it.
constexpr std::array kStateSources = {Source::entry_state, Source::checkpoint};

constexpr std::string_view kWindowShiftRemedy =
    "its window cache drops the cells a chunk may need; add --swa-full on to keep them";

class DenseFamily final : public Family {
 public:
  explicit DenseFamily(bool shares_cells) : Family(shares_cells) {}
  std::string_view name() const override { return "dense"; }
  ReuseMode mode() const override { return ReuseMode::trim; }
  std::span<const Source> sources() const override { return kTrimSources; }
  bool can_draft() const override { return true; }
};

// Sliding-window layers beside full attention, with libllama's full window cache.
class FullWindowFamily final : public Family {
 public:
  FullWindowFamily(bool shares_cells, std::int32_t window) : Family(shares_cells), window_(window) {}
  std::string_view name() const override { return "sliding_window"; }
  ReuseMode mode() const override { return ReuseMode::trim; }
  std::span<const Source> sources() const override { return kTrimSources; }
  std::int32_t window() const override { return window_; }
  bool may_lose_start() const override { return true; }
  std::string_view shift_remedy() const override { return kWindowShiftRemedy; }

 private:
  std::int32_t window_;
};

// Sliding-window layers that keep only the window's cells: a prefix is resumed at a kept state.
// Drafts are still cut (libllama lets a decode take over a cell of another position only once
// it lies outside its owner's window, so a draft never takes a cell the positions before it
// attend to).
class WindowOnlyFamily final : public Family {
 public:
  WindowOnlyFamily(bool shares_cells, std::int32_t window) : Family(shares_cells), window_(window) {}
  std::string_view name() const override { return "sliding_window (window only)"; }
  ReuseMode mode() const override { return ReuseMode::checkpoints; }
  std::span<const Source> sources() const override {
    if (shares_cells()) return kCheckpointSources;
    return kStateSources;
  }
  std::int32_t window() const override { return window_; }
  bool keeps_only_window() const override { return true; }
  std::string_view shift_remedy() const override { return kWindowShiftRemedy; }

 private:
  std::int32_t window_;
};

class RecurrentFamily final : public Family {
 public:
  explicit RecurrentFamily(bool shares_cells) : Family(shares_cells) {}
  std::string_view name() const override { return "recurrent"; }
  ReuseMode mode() const override { return ReuseMode::checkpoints; }
  bool keeps_cells() const override { return false; }
  std::span<const Source> sources() const override { return kStateSources; }
  DraftRollback draft_rollback() const override { return DraftRollback::checkpoint; }
};

class HybridFamily final : public Family {
 public:
  explicit HybridFamily(bool shares_cells) : Family(shares_cells) {}
  std::string_view name() const override { return "hybrid"; }
  ReuseMode mode() const override { return ReuseMode::checkpoints; }
  std::span<const Source> sources() const override { return kStateSources; }
  DraftRollback draft_rollback() const override { return DraftRollback::checkpoint; }
};

}  // namespace

const char* source_name(Source source) {
  switch (source) {
    case Source::device: return "device";
    case Source::running: return "running";
    case Source::host: return "host";
    case Source::entry_state: return "entry_state";
    case Source::checkpoint: return "checkpoint";
    case Source::window: return "window";
  }
  return "unknown";
}

std::unique_ptr<const Family> Family::of(const engine::ModelInfo& model) {
  const bool shares = model.cells_shared;
  switch (model.family) {
    case engine::ModelFamily::dense: return std::make_unique<DenseFamily>(shares);
    case engine::ModelFamily::sliding_window:
      if (model.swa_full) return std::make_unique<FullWindowFamily>(shares, model.sliding_window);
      return std::make_unique<WindowOnlyFamily>(shares, model.sliding_window);
    case engine::ModelFamily::recurrent: return std::make_unique<RecurrentFamily>(shares);
    case engine::ModelFamily::hybrid: return std::make_unique<HybridFamily>(shares);
  }
  return std::make_unique<DenseFamily>(shares);
}

engine::Pos Family::window_start(engine::Pos end) const { return std::max<engine::Pos>(0, end - window()); }

bool Family::window_intact(engine::Pos run_from, engine::Pos end) const {
  return !keeps_only_window() || run_from <= end - window() + 1;
}

}  // namespace prefixd::cache
